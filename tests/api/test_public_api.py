"""The public Python API (feedledger.open, Ledger, Source, Destination), through
the API itself on SQLite and PostgreSQL; docs/api.md's example is executed as written."""

from __future__ import annotations

import functools
import json
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from feedledger.model.jsonout import dumps

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "docs/api.md holds ONE runnable example"
    return blocks[0]


def test_doc_example_runs(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # the example creates its workspace with the default (SQLite) store; on the
    # PostgreSQL leg the same call is given the test's store
    monkeypatch.setattr(fl, "init", functools.partial(fl.init, store=store_url))
    exec(compile(_example(), str(DOC), "exec"), {"__name__": "docs_api_example"})


def _csv(*rows: tuple[str, str]) -> bytes:
    return ("parcel_id,zoning\n" + "".join(f"{k},{z}\n" for k, z in rows)).encode()


def _as_json(value: Any) -> Any:
    return json.loads(dumps(value))


@pytest.fixture
def led(store_url: str, tmp_path: Path) -> Any:
    with fl.init(tmp_path / "ws", store=store_url) as ledger:
        ledger.add_source("larimer", key=["parcel_id"], timezone="America/Denver")
        yield ledger


def test_open_paths_and_errors(led: fl.Ledger, store_url: str, tmp_path: Path) -> None:
    with fl.open(tmp_path / "ws") as again:
        assert [s.name for s in again.sources()] == ["larimer"]
        assert repr(again.source("larimer")) == "Source('larimer')"
    with fl.open(tmp_path / "ws" / "feedledger.toml") as again:
        again.source("larimer")
    with pytest.raises(fl.SourceNotFound) as caught:
        led.source("weld")
    assert isinstance(caught.value, fl.NotFoundError) and "weld" in str(caught.value)
    with fl.open(store=store_url, archive=tmp_path / "ws" / ".feedledger" / "archive") as bare:
        with pytest.raises(fl.SourceNotFound):
            bare.source("larimer")
        src = bare.add_source("larimer", key=["parcel_id"], timezone="America/Denver")
        assert src.watermark().published_at is None
    led.remove_source("larimer")
    with pytest.raises(fl.SourceNotFound):
        led.source("larimer")
    with pytest.raises(fl.ConfigError):
        fl.open(tmp_path / "ws", store=store_url)


def test_ingest_history_asof_changes_retract(led: fl.Ledger) -> None:
    src = led.source("larimer")
    r1 = src.ingest(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")), published_at=date(2026, 8, 1))
    assert r1.status is fl.IngestStatus.APPLIED
    assert (r1.counts.added, r1.counts.changed, r1.counts.deleted) == (2, 0, 0)
    assert r1.counts.by_change == {
        fl.ChangeKind.ADDED: 2, fl.ChangeKind.CHANGED: 0, fl.ChangeKind.DELETED: 0
    }  # fmt: skip
    assert r1.counts.held_back == {fl.Outcome.SUPERSEDED: 0, fl.Outcome.UNRESOLVED: 0}
    assert r1.published_at == datetime(2026, 8, 1, 6, tzinfo=UTC)  # 00:00 in Denver
    again = src.ingest(
        _csv(("0714-22-1", "R-1"), ("0714-22-2", "A")), published_at=date(2026, 8, 1)
    )
    assert again.status is fl.IngestStatus.ALREADY_APPLIED and again.applied_by_run == r1.run_id
    r2 = src.ingest(_csv(("0714-22-1", "MU-2")), published_at=datetime(2026, 8, 2, 9, 30))
    assert (r2.counts.changed, r2.counts.deleted) == (1, 1)
    assert r2.to_json()["changed"] == 1 and _as_json(r2)["status"] == "applied"

    history = src.history("0714-22-1")
    assert [v.attributes["zoning"] for v in history if v.attributes] == ["R-1", "MU-2"]
    assert history[0].change is fl.ChangeKind.ADDED and history[0].key == ["0714-22-1"]
    assert history[0].valid_to == history[1].valid_from
    assert _as_json(history[0])["attributes"] == {"parcel_id": "0714-22-1", "zoning": "R-1"}

    gone = src.asof("0714-22-2", valid=date(2026, 8, 3))
    assert gone.status is fl.Presence.ABSENT and gone.version is not None and gone.version.deleted
    before = src.asof("0714-22-1", valid=date(2026, 8, 1), known_at=r1.recorded_at)
    assert before.status is fl.Presence.PRESENT
    assert before.to_json()["status"] == "present"
    early = datetime(2020, 1, 1, tzinfo=UTC)
    unknown = src.asof("0714-22-1", valid=date(2026, 8, 1), known_at=early)
    assert unknown.status is fl.Presence.NOT_KNOWN
    assert set(unknown.to_json()) == {"status", "version", "first_recorded_at"}

    changes = led.changes(r2.run_id[:8])
    assert sorted((c.key[0], c.change) for c in changes) == [
        ("0714-22-1", fl.ChangeKind.CHANGED),
        ("0714-22-2", fl.ChangeKind.DELETED),
    ]
    runs = led.source("larimer").runs()
    assert [(r.kind, r.status) for r in runs] == [(fl.RunKind.LIVE, fl.RunStatus.SUCCEEDED)] * 2
    assert [r.resumed for r in runs] == [[], []]

    with pytest.raises(fl.RetractConflictError):
        led.retract(r1.run_id)
    undone = led.retract(r2.run_id)
    assert undone.retracted_runs == [r2.run_id] and undone.versions == 2
    assert set(undone.to_json()) >= {"run_id", "retracted_runs", "watermark", "retracted_at"}
    assert src.watermark().published_at == r1.published_at
    assert src.asof("0714-22-2", valid=date(2026, 8, 3)).status is fl.Presence.PRESENT


def test_backfill_gaps_snapshot_freeze_health_verify(led: fl.Ledger) -> None:
    src = led.source("larimer")
    src.ingest(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")), published_at=date(2026, 8, 1))
    src.archive_add(_csv(("0714-22-1", "MU-2"), ("0714-22-2", "A")), published_at=date(2026, 8, 4))
    added = src.archive_add(
        _csv(("0714-22-1", "MU-3"), ("0714-22-2", "A")),
        published_at=date(2026, 8, 6),
        name="larimer_2026-08-06.csv",
    )
    assert added.created and added.to_json()["created"] is True
    assert [p.published_at.date() for p in src.archive_list(start=date(2026, 8, 2))] == [
        date(2026, 8, 4),
        date(2026, 8, 6),
    ]
    assert len(src.archive_list(end=date(2026, 8, 4))) == 2

    plan = src.assess(date(2026, 8, 2), date(2026, 8, 6), fetch=False)
    assert len(plan.replayable) == 2 and plan.missing_dates == [
        date(2026, 8, 2),
        date(2026, 8, 3),
        date(2026, 8, 5),
    ]
    frozen = src.freeze(reason="outage recovery")
    assert frozen.frozen and frozen.changed and frozen.to_json()["reason"] == "outage recovery"
    assert src.freeze().changed is False
    report = src.backfill(date(2026, 8, 2), date(2026, 8, 6), fetch=False)
    assert isinstance(report, fl.WindowRun) and report.kind is fl.RunKind.BACKFILL
    assert [s.changes for s in report.steps] == [1, 1] and report.gaps_recorded == 2
    assert report.to_json()["status"] == "applied"
    nothing = src.backfill(date(2026, 8, 2), date(2026, 8, 6), fetch=False)
    assert isinstance(nothing, fl.NothingToDo) and nothing.to_json()["status"] == "nothing_to_do"
    assert src.thaw() == fl.FreezeState("larimer", False, True)

    assert [v.attributes["zoning"] for v in src.history("0714-22-1")] == ["R-1", "MU-2", "MU-3"]
    gap_answer = src.asof("0714-22-1", valid=date(2026, 8, 5))
    assert gap_answer.status is fl.Presence.NOT_OBSERVED and gap_answer.gap is not None
    assert gap_answer.last_observed and gap_answer.last_observed.attributes["zoning"] == "MU-2"
    assert gap_answer.next_observed and gap_answer.next_observed.attributes["zoning"] == "MU-3"
    assert [(g.start.date(), g.reason != "") for g in src.gaps()] == [
        (date(2026, 8, 2), True),
        (date(2026, 8, 5), True),
    ]
    assert _as_json(src.gaps()[0])["source"] == "larimer"

    frame = src.snapshot(valid=date(2026, 8, 4))
    assert sorted(zip(frame["parcel_id"], frame["zoning"], strict=True)) == [
        ("0714-22-1", "MU-2"),
        ("0714-22-2", "A"),
    ]
    batches = list(src.snapshot_batches(valid=date(2026, 8, 7), batch_rows=1))
    assert [b.num_rows for b in batches] == [1, 1]
    wm = src.watermark()
    assert wm.published_at is not None and wm.published_at.date() == date(2026, 8, 6)
    assert wm.to_json()["payload_id"] == added.payload_id

    health = led.health(at=datetime(2026, 8, 7, 12, tzinfo=UTC))
    assert [(h.source, h.status) for h in health] == [("larimer", fl.HealthStatus.OK)]
    assert health[0].to_json()["status"] == "ok"
    checked = src.verify()
    assert checked.ok and checked.to_json()["ok"] is True
    assert [(type(c), c.name, c.ok) for c in checked.checks] == [
        (fl.Check, "store_state", True), (fl.Check, "cache", True)
    ]  # fmt: skip
    assert checked.checks[0].rows == checked.entities and checked.checks[0].missing == []

    replayed = src.replay(date(2026, 8, 4))
    assert isinstance(replayed, fl.WindowRun) and replayed.kind is fl.RunKind.REPLAY
    assert "retracted_versions" in replayed.to_json()
    assert src.add_gap(date(2026, 8, 8), date(2026, 8, 9), "portal down").reason == "portal down"


def test_run_fetches_from_the_source_location(led: fl.Ledger, tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "larimer_2026-08-06.csv").write_bytes(_csv(("0714-22-1", "R-1")))
    src = led.add_source(
        "larimer", replace=True, key=["parcel_id"], timezone="America/Denver", fetch=str(exports)
    )
    first = src.run()
    assert isinstance(first, fl.Ingested) and first.counts.added == 1
    again = src.run()
    assert isinstance(again, fl.Ingested | fl.NothingToDo)
    if isinstance(again, fl.Ingested):
        assert again.status is fl.IngestStatus.ALREADY_APPLIED


def test_destination_live_sync_rebuild_and_reconcile(led: fl.Ledger, tmp_path: Path) -> None:
    src = led.source("larimer")
    src.ingest(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")), published_at=date(2026, 8, 1))
    dest = led.add_destination(
        "search", source="larimer", sqlite=tmp_path / "search.db", table="parcels"
    )
    assert led.destination("search").source == "larimer"
    with pytest.raises(fl.NotFoundError):
        led.destination("nowhere")
    manifest = dest.create_manifest("X-18")
    assert isinstance(manifest, fl.Manifest) and manifest.population == 2
    assert manifest.to_json()["population"] == 2
    rebuilt = dest.rebuild("X-18")
    assert rebuilt.outcomes[fl.Outcome.ACCEPTED] == 2 and rebuilt.to_json()["manifest"] == "X-18"
    src.ingest(_csv(("0714-22-1", "MU-2"), ("0714-22-2", "A")), published_at=date(2026, 8, 2))
    live = led.destination("search").sync_live(once=True)
    assert live.status is fl.SyncStatus.UP_TO_DATE and live.outcomes[fl.Outcome.ACCEPTED] == 1
    assert rebuilt.status is fl.SyncStatus.FINISHED
    assert all(isinstance(k, fl.Outcome) for k in [*live.outcomes, *rebuilt.outcomes])
    assert live.to_json()["destination"] == "search"
    checked = led.destination("search").reconcile("X-18")
    assert checked.population == 2 and checked.to_json()["manifest"] == "X-18"
    assert all(isinstance(k, fl.Outcome) for k in checked.outcomes)
    why = dest.explain("0714-22-1")
    assert isinstance(why, fl.Explanation) and why.key is not None
    assert why.to_json()["key"] == why.key and why.held is not None and not why.held.deleted
    assert why.last is not None and why.last.verdict is fl.Outcome.ACCEPTED
    assert [v.scope for v in why.verdicts] == ["live", "manifest"]
    assert why.verdicts[1].manifest == "X-18" and why.verdicts[1].at is not None


def test_to_json_is_the_cli_json(cli: Any, tmp_path: Path) -> None:
    """The next step moves the CLI onto this API: its results' JSON must be the CLI's."""
    cli("source", "add", "larimer", "--key", "parcel_id", "--timezone", "America/Denver")
    one = tmp_path / "larimer_2026-08-01.csv"
    one.write_bytes(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")))
    ingested = cli.json("ingest", "larimer", str(one))
    four = tmp_path / "larimer_2026-08-04.csv"
    four.write_bytes(_csv(("0714-22-1", "MU-2")))
    cli("archive", "add", "larimer", str(four))
    backfilled = cli.json("backfill", "larimer", "--from", "2026-08-02", "--to", "2026-08-04")
    with fl.open(cli.ws.config_path) as led:
        src = led.source("larimer")
        run_id = backfilled["run_id"]
        pairs: list[tuple[Any, Any]] = [
            (src.history("0714-22-1"), cli.json("history", "larimer", "0714-22-1")),
            (
                src.asof("0714-22-1", valid=date(2026, 8, 3)),
                cli.json("asof", "larimer", "0714-22-1", "--valid", "2026-08-03"),
            ),
            (
                src.asof("0714-22-2", valid=date(2026, 8, 5)),
                cli.json("asof", "larimer", "0714-22-2", "--valid", "2026-08-05"),
            ),
            (src.gaps(), cli.json("gaps", "larimer")),
            (src.watermark(), cli.json("watermark", "larimer")),
            (led.source("larimer").runs(), cli.json("runs", "larimer")),
            (led.changes(run_id), cli.json("changes", "--run", run_id)),
            (src.archive_list(), cli.json("archive", "list", "larimer")),
            (src.verify(), cli.json("verify", "larimer")),
            (
                src.assess(date(2026, 8, 1), date(2026, 8, 4), fetch=False),
                cli.json(
                    "assess", "larimer", "--from", "2026-08-01", "--to", "2026-08-04", "--no-fetch"
                ),
            ),
        ]
        for api_value, cli_value in pairs:
            assert _as_json(api_value) == cli_value
        assert ingested["run_id"] == led.source("larimer").runs()[0].run_id
        frozen = src.freeze(reason="x")
        assert _as_json(frozen) == {**cli.json("freeze", "larimer"), "changed": True}
        assert _as_json(src.thaw()) == {"source": "larimer", "frozen": False, "changed": True}


def test_verify_text_renders_typed_checks(cli: Any, tmp_path: Path) -> None:
    """`verify` (text) reads the typed `Check`s: one line per check, as before."""
    cli("source", "add", "larimer", "--key", "parcel_id", "--timezone", "America/Denver")
    one = tmp_path / "larimer_2026-08-01.csv"
    one.write_bytes(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")))
    cli("ingest", "larimer", str(one))
    lines = cli("verify", "larimer").stdout.splitlines()
    assert [line.split(" (")[0] for line in lines if ": " in line] == [
        "store_state: ok",
        "cache: ok",
    ]
    assert "(2 rows; missing 0, extra 0, different 0)" in lines[0]


def test_a_time_that_is_not_a_date_is_refused_in_one_line(led: fl.Ledger) -> None:
    src = led.source("larimer")
    src.ingest(_csv(("0714-22-1", "R-1")), published_at=date(2026, 8, 1))
    with pytest.raises(TypeError) as text:
        src.asof("0714-22-1", valid="2026-08-02")  # type: ignore[arg-type]
    assert str(text.value) == (
        "valid must be a datetime.date or datetime.datetime, not str '2026-08-02' "
        "(date.fromisoformat reads a YYYY-MM-DD text)"
    )
    with pytest.raises(TypeError, match=r"^known_at must be .*, not int 20260802$"):
        src.history("0714-22-1", known_at=20260802)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^valid must be a datetime.date"):
        src.snapshot_batches(valid="2026-08-02")  # type: ignore[arg-type]
