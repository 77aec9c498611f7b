"""Bitemporal ledger behaviour through the pipeline and CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import engine as eng
from feedledger.ledger import queries
from feedledger.ledger.schema import outbox, versions
from feedledger.pipeline.intake.ingest import ingest
from helpers import Cli, write_csv

HEADER = ["parcel_id", "zoning", "owner"]


def add_source(cli: Cli, *extra: str) -> None:
    cli("source", "add", "larimer", "--key", "parcel_id", "--timezone", "America/Denver", *extra)


def feed(tmp_path: Path, day: str, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    return write_csv(tmp_path / f"larimer_{day}.csv", header, rows)


def test_head_constant_matches_alembic() -> None:
    assert eng.head_revision() == eng.HEAD


def test_intermediate_states_kept_with_publisher_dates(cli: Cli, tmp_path: Path) -> None:
    add_source(cli)
    for day, code in (("2026-08-04", "R-1"), ("2026-08-06", "MU-2"), ("2026-08-09", "MU-3")):
        cli(
            "ingest",
            "larimer",
            str(feed(tmp_path, day, [["0714-22-1", code, "A"]])),
            "--published-at",
            day,
        )
    hist = cli.json("history", "larimer", "0714-22-1")
    assert [json.loads(json.dumps(h["attributes"]))["zoning"] for h in hist] == [
        "R-1",
        "MU-2",
        "MU-3",
    ]
    # valid time from the payload (00:00 America/Denver = 06:00Z), never the clock
    assert [h["valid_from"] for h in hist] == [
        "2026-08-04T06:00:00+00:00",
        "2026-08-06T06:00:00+00:00",
        "2026-08-09T06:00:00+00:00",
    ]
    assert [h["valid_to"] for h in hist] == [hist[1]["valid_from"], hist[2]["valid_from"], None]
    # transaction time from the commit: strictly increasing, and today (not August)
    recorded = [h["recorded_at"] for h in hist]
    assert recorded == sorted(recorded) and len(set(recorded)) == 3
    assert all(r > "2026-11" for r in recorded)
    assert all(h["valid_to"] is None or h["valid_to"] > h["valid_from"] for h in hist)

    asof = cli.json("asof", "larimer", "0714-22-1", "--valid", "2026-08-07")
    assert asof["status"] == "present" and asof["version"]["attributes"]["zoning"] == "MU-2"
    # before the source's first observation: nothing was observed then
    before = cli.json("asof", "larimer", "0714-22-1", "--valid", "2026-08-03")
    assert before["status"] == "not_observed" and before["version"] is None
    assert before["gap"] is None and before["next_observed_at"] == "2026-08-04T06:00:00+00:00"
    # as known before the third payload was recorded, the 9th still looked like MU-2
    known = cli.json(
        "asof",
        "larimer",
        "0714-22-1",
        "--valid",
        "2026-08-10",
        "--known-at",
        hist[1]["recorded_at"],
    )
    assert known["version"]["attributes"]["zoning"] == "MU-2"


def test_deleted_then_republished(cli: Cli, tmp_path: Path) -> None:
    add_source(cli)
    rows = [["a", "R-1", "x"], ["b", "R-1", "y"], ["c", "R-1", "z"]]
    cli(
        "ingest", "larimer", str(feed(tmp_path, "2026-08-01", rows)), "--published-at", "2026-08-01"
    )
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-02", rows[:2])),
        "--published-at",
        "2026-08-02",
    )
    out = cli.json(
        "ingest", "larimer", str(feed(tmp_path, "2026-08-03", rows)), "--published-at", "2026-08-03"
    )
    assert out["added"] == 1 and out["deleted"] == 0
    hist = cli.json("history", "larimer", "c")
    assert [h["deleted"] for h in hist] == [False, True, False]
    assert cli.json("asof", "larimer", "c", "--valid", "2026-08-02T12:00:00")["status"] == "absent"
    assert cli.json("asof", "larimer", "c", "--valid", "2026-08-03")["status"] == "present"
    changes = cli.json("changes", "--run", out["run_id"])
    assert [(c["key"], c["change"], c["before"]) for c in changes] == [(["c"], "added", None)]


def test_compound_keys_compare_field_by_field(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "s", "--key", "a,b")
    path = write_csv(tmp_path / "s.csv", ["a", "b", "v"], [["a", "bc", "1"], ["ab", "c", "2"]])
    out = cli.json("ingest", "s", str(path), "--published-at", "2026-08-01")
    assert out["added"] == 2
    assert cli.json("history", "s", '["a","bc"]')[0]["attributes"]["v"] == "1"
    assert cli.json("history", "s", '["ab","c"]')[0]["attributes"]["v"] == "2"


def test_values_kept_as_stated(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "j", "--key", "id", "--format", "jsonl")
    path = tmp_path / "j.jsonl"
    path.write_text(
        '{"id": "p1", "acres": 2.10, "big": 12345678901234567890, "when": "08/06/2026"}\n'
    )
    cli("ingest", "j", str(path), "--published-at", "2026-08-01")
    text = cli("history", "j", "p1", "--json").stdout
    assert '"acres":2.10' in text and '"big":12345678901234567890' in text
    assert '"when":"08/06/2026"' in text


def test_same_payload_twice_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    add_source(cli)
    path = feed(tmp_path, "2026-08-01", [["a", "R-1", "x"]])
    first = cli.json("ingest", "larimer", str(path), "--published-at", "2026-08-01")
    again = cli.json("ingest", "larimer", str(path), "--published-at", "2026-08-01")
    assert first["status"] == "applied" and again["status"] == "already_applied"
    assert again["applied_by_run"] == first["run_id"] and again["changes"] == 0
    assert len(cli.json("history", "larimer", "a")) == 1
    assert len(cli.json("runs", "larimer")) == 1


def test_commit_sequence_orders_same_microsecond(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedledger.config import make_source
    from feedledger.ledger import store as store_mod

    workspace.add_source(make_source("s", key=("id",)))
    frozen = 1_790_000_000_000_000
    monkeypatch.setattr(store_mod, "now_us", lambda: frozen)
    with Context(workspace) as ctx:
        ingest(ctx, "s", b"id,v\n1,a\n", published_at="2026-08-01")
        ingest(ctx, "s", b"id,v\n1,b\n", published_at="2026-08-02")
        hist = queries.history(ctx.store, "s", '["1"]')
    assert hist[0].recorded_at < hist[1].recorded_at  # distinct even with a frozen clock
    assert hist[0].txn_seq < hist[1].txn_seq


def test_outbox_rows_written_with_changes(workspace: Workspace) -> None:
    from feedledger.config import make_source

    workspace.add_source(make_source("s", key=("id",)))
    with Context(workspace) as ctx:
        r1 = ingest(ctx, "s", b"id,v\n1,a\n2,b\n", published_at="2026-08-01")
        ingest(ctx, "s", b"id,v\n1,a\n2,b\n", published_at="2026-08-02")  # no change
        with ctx.store.engine.connect() as conn:
            rows = conn.execute(outbox.select()).all()
            n_versions = conn.execute(versions.select()).all()
    assert len(rows) == 1 and rows[0].changes == 2 and rows[0].status == "pending"
    assert rows[0].payload_id == r1.payload.payload_id and len(n_versions) == 2


def test_revision_guard_outcomes(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "sup", "--key", "id", "--revision", "rev", "--kind", "changes")

    def day(d: str, rows: list[list[str]]) -> Path:
        return write_csv(tmp_path / f"sup_{d}.csv", ["id", "rev", "name"], rows)

    cli(
        "ingest",
        "sup",
        str(day("2026-08-01", [["V-404", "8", "new"]])),
        "--published-at",
        "2026-08-01",
    )
    out = cli.json(
        "ingest",
        "sup",
        str(
            day(
                "2026-08-02",
                [
                    ["V-404", "7", "old"],  # older revision -> superseded
                ],
            )
        ),
        "--published-at",
        "2026-08-02",
    )
    assert out["superseded"] == 1 and out["changed"] == 0
    out = cli.json(
        "ingest",
        "sup",
        str(day("2026-08-03", [["V-404", "8", "new"]])),
        "--published-at",
        "2026-08-03",
    )
    assert out["unchanged"] == 1  # equal revision, same content: already current
    out = cli.json(
        "ingest",
        "sup",
        str(day("2026-08-04", [["V-404", "8", "different"]])),
        "--published-at",
        "2026-08-04",
    )
    assert out["unresolved"] == 1 and out["changed"] == 0  # held, never applied
    out = cli.json(
        "ingest",
        "sup",
        str(day("2026-08-05", [["V-404", "10", "newer"]])),
        "--published-at",
        "2026-08-05",
    )
    assert out["changed"] == 1  # numeric compare: 10 > 8
    hist = cli.json("history", "sup", "V-404")
    assert [h["attributes"]["name"] for h in hist] == ["new", "newer"]


def test_changes_kind_deletes_only_marked(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "c", "--key", "id", "--kind", "changes", "--format", "jsonl")
    p1 = tmp_path / "c1.jsonl"
    p1.write_text('{"id":"a","v":1}\n{"id":"b","v":1}\n')
    cli("ingest", "c", str(p1), "--published-at", "2026-08-01")
    p2 = tmp_path / "c2.jsonl"
    p2.write_text('{"id":"a","_deleted":true}\n')
    out = cli.json("ingest", "c", str(p2), "--published-at", "2026-08-02")
    assert out["deleted"] == 1 and out["added"] == 0
    p3 = tmp_path / "c3.jsonl"
    p3.write_text('{"id":"c","v":1}\n{"id":"b","op":"d"}\n')
    out = cli.json("ingest", "c", str(p3), "--published-at", "2026-08-03")
    assert out["added"] == 1 and out["deleted"] == 1
    assert cli.json("asof", "c", "a", "--valid", "2026-08-03")["status"] == "absent"
    assert cli.json("asof", "c", "c", "--valid", "2026-08-03")["status"] == "present"


def test_snapshot_query_streams_state_as_of(cli: Cli, tmp_path: Path) -> None:
    add_source(cli)
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-01", [["a", "R-1", "x"], ["b", "R-2", "y"]])),
        "--published-at",
        "2026-08-01",
    )
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-05", [["a", "MU-2", "x"]])),
        "--published-at",
        "2026-08-05",
    )
    csv_out = cli("snapshot", "larimer", "--valid", "2026-08-03").stdout
    # columns in the source's order, not alphabetical
    assert csv_out.splitlines() == ["parcel_id,zoning,owner", "a,R-1,x", "b,R-2,y"]
    jl = cli("snapshot", "larimer", "--valid", "2026-08-06", "--format", "jsonl").stdout
    assert [json.loads(x)["zoning"] for x in jl.splitlines()] == ["MU-2"]


def test_verify_state_consistent_and_cache_rebuilt(
    cli: Cli, tmp_path: Path, workspace: Workspace
) -> None:
    add_source(cli)
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-01", [["a", "R-1", "x"], ["b", "R-1", "y"]])),
        "--published-at",
        "2026-08-01",
    )
    for f in (workspace.state_dir / "state").glob("*.arrow"):
        f.unlink()  # a lost cache falls back to the store
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-02", [["a", "R-2", "x"], ["b", "R-1", "y"]])),
        "--published-at",
        "2026-08-02",
    )
    report = cli.json("verify", "larimer")
    assert report["ok"] and report["entities"] == 2


def test_watermark_and_runs_json(cli: Cli, tmp_path: Path) -> None:
    add_source(cli)
    assert cli.json("watermark", "larimer") == {
        "source": "larimer",
        "published_at": None,
        "payload_id": None,
    }
    out = cli.json(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-01", [["a", "R", "x"]])),
        "--published-at",
        "2026-08-01",
    )
    wm = cli.json("watermark", "larimer")
    assert wm == {
        "source": "larimer",
        "published_at": "2026-08-01T06:00:00+00:00",
        "payload_id": out["payload_id"],
    }
    runs = cli.json("runs", "larimer")
    assert runs[0]["run_id"] == out["run_id"] and runs[0]["kind"] == "live"
    assert runs[0]["status"] == "succeeded" and runs[0]["changes"] == 1
    assert set(runs[0]) >= {
        "run_id",
        "source",
        "kind",
        "status",
        "started_at",
        "finished_at",
        "payloads",
        "changes",
    }


@pytest.mark.parametrize("overlapped", [True, False], ids=["overlapped", "attach-first"])
def test_staged_bulk_path_equals_direct_path(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, overlapped: bool
) -> None:
    """Large payloads on SQLite go through ADBC scratch files, each attached and copied
    as soon as it is complete (or all attached before the transaction where SQLite
    cannot attach inside one); force it on small data, a row per file, and check the
    ledger is identical to the direct path (and nothing is left behind)."""
    from feedledger.config import make_source
    from feedledger.ledger import bulk, staging

    workspace.add_source(make_source("s", key=("id",)))
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 1)
    monkeypatch.setattr(staging, "FILE_ROWS", 1)
    monkeypatch.setattr(staging, "attach_in_transaction", lambda: overlapped)
    monkeypatch.setattr(bulk, "CHUNK_ROWS", 1)  # several slices (ADBC append, COPY parts)
    monkeypatch.setattr(bulk, "VERSION_CHUNK_ROWS", 1)  # texts encoded a row at a time
    with Context(workspace) as ctx:
        ingest(ctx, "s", b"id,v\n1,a\n2,b\n", published_at="2026-08-01")
        ingest(ctx, "s", b"id,v\n1,A\n3,c\n", published_at="2026-08-02")
        hist = {k: queries.history(ctx.store, "s", k) for k in ('["1"]', '["2"]', '["3"]')}
    assert [(v.change, v.deleted, v.attributes) for v in hist['["1"]']] == [
        ("added", False, '{"id":"1","v":"a"}'),
        ("changed", False, '{"id":"1","v":"A"}'),
    ]
    assert [v.change for v in hist['["2"]']] == ["added", "deleted"]
    assert hist['["3"]'][0].valid_from > hist['["1"]'][0].valid_from
    assert all(isinstance(v.deleted, bool) for vs in hist.values() for v in vs)
    leftovers = [p for p in workspace.root.rglob("*stage-*")]
    assert leftovers == []


@pytest.mark.parametrize("path", ["overlapped", "attach-first", "direct"])
def test_failure_while_encoding_a_later_chunk_rolls_the_payload_back(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A payload's version texts are encoded a chunk at a time while earlier chunks are
    being written (staged on SQLite, COPY on PostgreSQL, executemany for small ones). An
    error in a later chunk must leave none of the payload (Invariant 2): no version, no
    watermark, no application, no scratch file; the same payload then applies whole."""
    from feedledger.config import make_source
    from feedledger.formats.observations import Observations
    from feedledger.ledger import bulk, staging
    from feedledger.ledger.schema import applications

    workspace.add_source(make_source("s", key=("id",)))
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 10**9 if path == "direct" else 1)
    monkeypatch.setattr(bulk, "VERSION_CHUNK_ROWS", 2)
    monkeypatch.setattr(staging, "FILE_ROWS", 2)  # a file per chunk: two copied already
    monkeypatch.setattr(staging, "attach_in_transaction", lambda: path == "overlapped")
    # the texts come from `attributes` (the codebook's sample, a JSON payload's chunks)
    # or, for a CSV payload's chunks, from the columns `attribute_rows` gives
    real, real_rows = Observations.attributes, Observations.attribute_rows
    calls: list[int] = []

    def failing(self: Observations, idx: object) -> object:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("encoder failed on the third chunk")
        return real(self, idx)  # type: ignore[arg-type]

    def failing_rows(self: Observations, idx: object) -> object:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("encoder failed on the third chunk")
        return real_rows(self, idx)  # type: ignore[arg-type]

    data = b"id,v\n" + b"".join(b"%d,x%d\n" % (i, i) for i in range(9))
    with Context(workspace) as ctx:
        monkeypatch.setattr(Observations, "attributes", failing)
        monkeypatch.setattr(Observations, "attribute_rows", failing_rows)
        with pytest.raises(RuntimeError, match="third chunk"):
            ingest(ctx, "s", data, published_at="2026-08-01")
        with ctx.store.begin() as conn:
            assert conn.execute(versions.select()).all() == []
            assert conn.execute(applications.select()).all() == []
        assert ctx.store.watermark("s") is None
        assert list(workspace.root.rglob("*stage-*")) == []
        assert not [t for t in threading.enumerate() if t.name == "feedledger-stage"]
        monkeypatch.setattr(Observations, "attributes", real)
        monkeypatch.setattr(Observations, "attribute_rows", real_rows)
        result = ingest(ctx, "s", data, published_at="2026-08-01")
        assert result.status == "applied" and result.counts["added"] == 9
        hist = queries.history(ctx.store, "s", '["7"]')
    assert [v.attributes for v in hist] == ['{"id":"7","v":"x7"}']


def test_staged_payload_killed_mid_transaction_leaves_scratch_files_that_the_rerun_sweeps(
    tmp_path: Path,
) -> None:
    """kill -9 inside the transaction of a payload large enough to be staged (SQLite):
    the ledger has none of it, the dead process's scratch files are left behind; the
    rerun deletes them and applies the payload whole."""
    import os
    import subprocess
    import sys

    from feedledger.ledger import bulk

    rows = bulk.STAGE_MIN_ROWS + 10
    payload = write_csv(tmp_path / "big.csv", ["id", "v"], [[str(i), "x"] for i in range(rows)])
    ws = tmp_path / "ws"
    ws.mkdir()
    exe = [sys.executable, "-m", "feedledger"]
    env = {k: v for k, v in os.environ.items() if k != "FEEDLEDGER_FAULT"}

    def run(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = {"FEEDLEDGER_FAULT": fault} if fault else {}
        return subprocess.run(
            [*exe, *args], cwd=ws, env={**env, **extra}, capture_output=True, text=True
        )

    assert run("init").returncode == 0
    assert run("source", "add", "big", "--key", "id").returncode == 0
    ingest_args = ("ingest", "big", str(payload), "--published-at", "2026-08-01", "--json")
    killed = run(*ingest_args, fault="mid_transaction:kill")
    assert killed.returncode == -9, killed.stderr
    store = ws / ".feedledger" / "ledger.db"
    left = list(store.parent.glob(".ledger.db.stage-*"))
    assert left, "the killed process's scratch files should still be there"
    done = run(*ingest_args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == rows
    assert list(store.parent.glob(".ledger.db.stage-*")) == []
    import sqlite3

    with sqlite3.connect(store) as raw:
        assert raw.execute("SELECT count(*) FROM versions").fetchone() == (rows,)


def test_new_sqlite_store_uses_16k_pages(tmp_path: Path) -> None:
    """New SQLite stores get 16 KiB pages (fewer B-tree and WAL pages per bulk-written
    row); an existing store keeps the page size it was created with."""
    import sqlite3

    from feedledger.ledger.store import Store

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as raw:
        raw.execute("CREATE TABLE t (x)")
    for path, expected in ((tmp_path / "new.db", eng.PAGE_SIZE), (old, 4096)):
        store = Store(f"sqlite:///{path}", check=False)
        with store.begin() as conn:
            size = conn.exec_driver_sql("PRAGMA page_size").scalar()
        store.close()
        assert size == expected, path


def test_one_run_per_source_lease(cli: Cli, tmp_path: Path, workspace: Workspace) -> None:
    """A live lease held by another (alive) holder refuses a second run of that source;
    other sources are unaffected; an expired lease is taken over."""
    from feedledger.ledger.runs import leases
    from feedledger.ledger.schema import leases as leases_t
    from feedledger.ledger.store import Store

    add_source(cli)
    cli("source", "add", "other", "--key", "id")
    store = Store(workspace.store_url)
    leases.acquire(store, "larimer", "otherhost:1:abcd", "run-x")
    refused = cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-01", [["a", "R", "x"]])),
        "--published-at",
        "2026-08-01",
        expect=7,
    )
    assert "holds this source's lease" in refused.stderr and "run-x" in refused.stderr
    other = write_csv(tmp_path / "o.csv", ["id"], [["1"]])
    cli("ingest", "other", str(other), "--published-at", "2026-08-01")
    with store.begin() as conn:
        conn.execute(leases_t.update().where(leases_t.c.source == "larimer").values(expires_at=1))
    cli(
        "ingest",
        "larimer",
        str(feed(tmp_path, "2026-08-01", [["a", "R", "x"]])),
        "--published-at",
        "2026-08-01",
    )
    store.close()


def test_published_at_from_payload_field(cli: Cli, tmp_path: Path) -> None:
    cli(
        "source",
        "add",
        "f",
        "--key",
        "id",
        "--published-from",
        "field:as_of",
        "--timezone",
        "America/Denver",
    )
    ok = write_csv(
        tmp_path / "export.csv", ["id", "as_of"], [["1", "2026-08-06"], ["2", "2026-08-06"]]
    )
    out = cli.json("ingest", "f", str(ok))
    assert out["published_at"] == "2026-08-06T06:00:00+00:00"
    mixed = write_csv(
        tmp_path / "mixed.csv", ["id", "as_of"], [["1", "2026-08-07"], ["2", "2026-08-08"]]
    )
    bad = cli("ingest", "f", str(mixed), expect=4)
    assert "2 different publisher dates" in bad.stderr


def test_unreadable_payload_does_not_claim_its_date(cli: Cli, tmp_path: Path) -> None:
    """A payload that cannot be read keeps its bytes (rejected/) but not its publication
    slot: the corrected file for the same date applies."""
    add_source(cli)
    bad = tmp_path / "larimer_2026-08-06.csv"
    bad.write_bytes(b"parcel_id,zoning\n1,R-1\n1,R-2\n")  # duplicate key
    cli("ingest", "larimer", str(bad), "--published-at", "2026-08-06", expect=4)
    good = feed(tmp_path, "2026-08-06-fixed", [["1", "R-1", "x"]])
    out = cli.json("ingest", "larimer", str(good), "--published-at", "2026-08-06")
    assert out["status"] == "applied" and out["added"] == 1
    assert len(cli.json("archive", "list", "larimer")) == 1


def test_state_cache_files_are_pruned_per_source(workspace: Workspace) -> None:
    """Old cache files and pending files of killed processes are removed; a source whose
    name has dots never touches another source's files."""
    from feedledger.config import make_source

    workspace.add_source(make_source("a", key=("id",)))
    workspace.add_source(make_source("a.b", key=("id",)))
    cache_dir = workspace.state_dir / "state"
    with Context(workspace) as ctx:
        ingest(ctx, "a.b", b"id,v\n1,x\n", published_at="2026-08-01")
        ingest(ctx, "a", b"id,v\n1,x\n", published_at="2026-08-01")
        store_id = ctx.cache.store_id
        (cache_dir / f"a.{store_id}.9.pending4242").write_bytes(b"left by a killed run")
        ingest(ctx, "a", b"id,v\n1,y\n", published_at="2026-08-02")
    names = sorted(p.name for p in cache_dir.iterdir())
    assert names == sorted([f"a.b.{store_id}.1.arrow", f"a.{store_id}.2.arrow"])


def test_migration_from_0001_keeps_data(store_url: str, tmp_path: Path) -> None:
    """A store created at revision 0001 (the first schema) with rows in it is refused with
    a clear hint until `db upgrade`, which adds the gap and freeze tables and keeps every
    row."""
    from alembic import command
    from sqlalchemy import text

    from feedledger.ledger.store import Store
    from feedledger.model.errors import StoreUnavailableError

    ws = Workspace.create(tmp_path / "old", store_url=store_url, archive=None)
    engine = eng.make_engine(ws.store_url)
    with engine.begin() as conn:
        command.upgrade(eng._config(conn), "0001")
        conn.execute(
            text(
                "INSERT INTO payloads (payload_id, source, sha256, published_at, fetched_at, "
                "size, indexed_at) VALUES ('p1', 'p', :sha, 1, 2, 3, 4)"
            ),
            {"sha": "0" * 64},
        )
        store_id = conn.execute(text("SELECT value FROM counters WHERE name='store_id'")).scalar()
    engine.dispose()
    with pytest.raises(StoreUnavailableError, match=r"is at revision 0001.*db upgrade"):
        Store(ws.store_url)
    cli = Cli(ws)
    cli("db", "upgrade")
    assert cli.json("db", "current")["current"] == eng.HEAD
    store = Store(ws.store_url)
    try:
        assert store.store_id() == store_id
        assert [r.payload_id for r in store.list_payloads("p")] == ["p1"]
    finally:
        store.close()
    cli("source", "add", "p", "--key", "id")
    assert cli.json("gaps", "p") == []


def test_a_scratch_file_that_cannot_be_detached_discards_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If detaching a scratch file fails after a staged payload's transaction, the
    store's connection is discarded rather than pooled with the file still attached:
    the next staged payload (same schema names) still applies."""
    from feedledger.config import Workspace as Ws
    from feedledger.config import make_source
    from feedledger.ledger import bulk, staging

    ws = Ws.create(tmp_path / "w", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    engine = eng.make_engine(ws.store_url)
    eng.upgrade(engine)
    engine.dispose()
    ws.add_source(make_source("s", key=("id",)))
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 1)
    real = staging.Stager.detach_all
    failed: list[int] = []

    def flaky(self: staging.Stager, raw: object) -> None:
        if not failed:
            failed.append(1)
            raise RuntimeError("detach failed")
        real(self, raw)

    monkeypatch.setattr(staging.Stager, "detach_all", flaky)
    with Context(ws) as ctx:
        ingest(ctx, "s", b"id,v\n1,a\n", published_at="2026-08-01")
        ingest(ctx, "s", b"id,v\n1,b\n", published_at="2026-08-02")
        hist = queries.history(ctx.store, "s", '["1"]')
    assert failed and [v.attributes for v in hist] == ['{"id":"1","v":"a"}', '{"id":"1","v":"b"}']
