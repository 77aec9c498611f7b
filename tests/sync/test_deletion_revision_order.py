"""A deletion is an event in the revision order (invariant 9): a tombstone written after
revision r sorts after r, so it wins over the state it deletes even when the publisher
gave the deleted record no new revision, and only a strictly newer revision brings the
record back -- through the guard (SQLite and PostgreSQL destinations), the live route,
a rebuild from a manifest, `reconcile` and `sync-explain`, for snapshot absences and for
`changes` delete markers that carry no revision. Sources without `--revision` keep
their behaviour (the version id orders everything)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import feedledger as fl
from feedledger.model.destination import FILTERED_HASH, TOMBSTONE_HASH
from feedledger.model.types import Outcome
from feedledger.sync.transform import build, content_hash
from feedledger.sync.versions import VersionRow
from helpers import Cli, write_csv
from sync.guard_destinations import SRC, declare, doc, held, target


def day(cli: Cli, tmp_path: Path, date: str, rows: list[list[str]], *, rev: bool = True) -> None:
    header = ["id", "rev", "name"] if rev else ["id", "name"]
    path = write_csv(tmp_path / f"{SRC}_{date}.csv", header, rows)
    cli("ingest", SRC, str(path), "--published-at", date)


def outcomes(report: dict[str, object]) -> dict[str, int]:
    got = report["outcomes"]
    assert isinstance(got, dict)
    return {k: v for k, v in got.items() if v}


# -- the guard itself -----------------------------------------------------------------------


def test_the_guard_orders_a_deletion_just_after_the_revision_it_deletes(
    record_place: tuple[str, str, str],
) -> None:
    t = target(record_place)
    try:
        assert [v.verdict for v in t.write([doc("b", 5, {"name": "b"})])] == ["accepted"]
        # the deletion carries the deleted record's revision: it wins
        assert [v.verdict for v in t.write([doc("b", 5, None)])] == ["accepted"]
        assert held(t, "b") == (5, "M-3", True)
        # repeated: nothing to do
        assert [v.verdict for v in t.write([doc("b", 5, None)])] == ["already_current"]
        # the deleted state at the same revision, late (a rebuild's read): never resurrects
        [late] = t.write([doc("b", 5, {"name": "b"})])
        assert late.verdict == "superseded"
        assert "deleted after revision 5" in (late.reason or "")
        assert "only a revision newer than 5" in (late.reason or "")
        # ... not even with a newer transform generation
        [regen] = t.write([doc("b", 5, {"name": "B"}, "M-4")])
        assert regen.verdict == "superseded" and held(t, "b") == (5, "M-3", True)
        # an older revision: superseded, as ever
        assert [v.verdict for v in t.write([doc("b", 4, {"name": "b"})])] == ["superseded"]
        # a strictly newer revision brings it back
        assert [v.verdict for v in t.write([doc("b", 6, {"name": "b6"})])] == ["accepted"]
        assert held(t, "b") == (6, "M-3", False)
        # and the old deletion, late, does not delete it again
        assert [v.verdict for v in t.write([doc("b", 5, None)])] == ["superseded"]
        assert held(t, "b") == (6, "M-3", False)
        # same revision, other content, both live: still unresolved (not a deletion)
        assert [v.verdict for v in t.write([doc("b", 6, {"name": "?"})])] == ["unresolved"]
        # a batch mixing both on one write (the PostgreSQL statement judges them together)
        both = t.write([doc("b", 6, None), doc("c", 1, {"name": "c"})])
        assert [v.verdict for v in both] == ["accepted", "accepted"]
        assert held(t, "b") == (6, "M-3", True)
    finally:
        t.close()


def test_a_record_the_transform_left_out_is_not_a_deletion(
    record_place: tuple[str, str, str],
) -> None:
    """A transform's None ("not in this destination") is a tombstone in the record_place of its
    revision: a newer generation at the same revision may bring the record back. A
    deletion by the source still wins over both."""
    assert content_hash(None) == TOMBSTONE_HASH
    assert hashlib.sha256(b"\x00filtered").hexdigest()[:32] == FILTERED_HASH
    row = VersionRow(json.dumps(["b"]), '{"name":"b"}', "5", False, 11, 0)

    def left_out(_version: dict[str, object]) -> None:
        return None

    t = target(record_place)
    try:
        out = build(row, transform=left_out, generation="M-3", rank=3, use_revision_field=True)
        assert out.deleted and out.content_hash == FILTERED_HASH
        assert [v.verdict for v in t.write([out])] == ["accepted"]
        assert held(t, "b") == (5, "M-3", True)
        back = build(row, transform=None, generation="M-4", rank=4, use_revision_field=True)
        assert [v.verdict for v in t.write([back])] == ["accepted"]
        assert held(t, "b") == (5, "M-4", False)
        # the source deletes it at that revision: the deletion wins over the document ...
        gone = build(row._replace(deleted=True, attributes=None), transform=left_out,
                     generation="M-4", rank=4, use_revision_field=True)  # fmt: skip
        assert gone.content_hash == TOMBSTONE_HASH
        assert [v.verdict for v in t.write([gone])] == ["accepted"]
        # ... and over a later left-out tombstone of the deleted revision, newer generation
        late = build(row, transform=left_out, generation="M-5", rank=5, use_revision_field=True)
        assert [v.verdict for v in t.write([late])] == ["superseded"]
        assert held(t, "b") == (5, "M-4", True)
    finally:
        t.close()


# -- live route, reconcile, sync-explain ----------------------------------------------------


def test_a_snapshot_deletion_reaches_the_destination_and_reconcile_agrees(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    declare(cli, record_place)
    day(cli, tmp_path, "2026-08-01", [["a", "1", "x"], ["b", "1", "y"]])
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 2}
    cli("manifest", "create", "before", "--source", SRC)
    day(cli, tmp_path, "2026-08-02", [["a", "1", "x"]])
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        assert held(t, "b") == (1, "M-1", True) and held(t, "a") == (1, "M-1", False)
    finally:
        t.close()
    # sync-explain says what the destination holds and why, in words
    got = cli.json("sync-explain", "search", "b")
    assert got["held"]["deleted"] is True and got["held"]["revision"] == 1
    assert got["last"]["verdict"] == "accepted" and "deletion" in got["last"]["reason"]
    human = cli("sync-explain", "search", "b").stdout
    assert "deleted after revision 1" in human
    with fl.open(cli.ws.config_path) as ledger:  # the Python API (and HTTP: its to_json())
        typed = ledger.destination("search").explain("b")
    assert typed.held is not None and typed.held.deleted and typed.held.revision == 1
    assert typed.last is not None and typed.last.verdict == Outcome.ACCEPTED
    assert typed.to_json() == got
    # a rebuild from the manifest frozen before the deletion reads b's revision 1: the
    # deletion held wins, and reconcile finds nothing newer than the ledger
    rebuilt = cli.json("sync", "search", "--manifest", "before")
    assert outcomes(rebuilt) == {"already_current": 1, "superseded": 1}
    why = cli.json("sync-explain", "search", "b")["last"]
    assert why["verdict"] == "superseded" and "deleted after revision 1" in why["reason"]
    report = cli.json("reconcile", "search", "--manifest", "before")
    assert report["stale"] == [] and report["unresolved"] == [], report
    assert report["complete"] is True


def test_a_rebuild_writes_the_deletion_over_the_same_revision(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    declare(cli, record_place)
    day(cli, tmp_path, "2026-08-01", [["a", "1", "x"], ["b", "1", "y"]])
    cli("sync", "search", "--live", "--once")
    day(cli, tmp_path, "2026-08-02", [["a", "1", "x"]])
    # the live route has not run since: the rebuild brings the deletion
    keys = tmp_path / "keys.txt"
    keys.write_text("a\nb\n", encoding="utf-8")
    cli("manifest", "create", "after", "--source", SRC, "--keys-from", str(keys))
    rebuilt = cli.json("sync", "search", "--manifest", "after")
    t = target(record_place)
    try:
        assert held(t, "b") == (1, "M-1", True)
    finally:
        t.close()
    assert rebuilt["outcomes"]["unresolved"] == 0
    report = cli.json("reconcile", "search", "--manifest", "after")
    assert report["complete"] is True and report["stale"] == [], report


def test_reconcile_reports_a_deletion_the_destination_lacks_as_stale_not_newer(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    declare(cli, record_place)
    day(cli, tmp_path, "2026-08-01", [["a", "1", "x"], ["b", "1", "y"]])
    cli("manifest", "create", "all", "--source", SRC)
    cli("sync", "search", "--manifest", "all")
    day(cli, tmp_path, "2026-08-02", [["a", "1", "x"]])  # not synced yet
    report = json.loads(cli("reconcile", "search", "--manifest", "all", "--json", expect=1).stdout)
    [stale] = report["stale"]
    assert stale["key"] == ["b"] and stale["expected_deleted"] is True
    assert stale["found_deleted"] is False and "newer" not in stale.get("note", "")


# -- changes sources, republication ---------------------------------------------------------


def test_a_changes_delete_marker_without_revision_reaches_the_destination(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev", "--kind", "changes",
        "--format", "jsonl")  # fmt: skip
    declare(cli, record_place)

    def changes(date: str, *records: dict[str, object]) -> None:
        path = tmp_path / f"{SRC}_{date}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        cli("ingest", SRC, str(path), "--published-at", date)

    changes("2026-08-01", {"id": "a", "rev": 3, "name": "x"}, {"id": "b", "rev": 3, "name": "y"})
    cli("sync", "search", "--live", "--once")
    changes("2026-08-02", {"id": "b", "_deleted": True})
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        assert held(t, "b") == (3, "M-1", True)
    finally:
        t.close()
    changes("2026-08-03", {"id": "b", "rev": 4, "name": "back"})
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        assert held(t, "b") == (4, "M-1", False)
    finally:
        t.close()


def test_republished_at_the_same_revision_stays_deleted_a_newer_revision_comes_back(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    declare(cli, record_place)
    day(cli, tmp_path, "2026-08-01", [["a", "1", "x"], ["b", "1", "y"]])
    cli("sync", "search", "--live", "--once")
    day(cli, tmp_path, "2026-08-02", [["a", "1", "x"]])
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    # the publisher serves b again with the revision it had: the ledger holds it
    # (`unresolved`, reported) and b stays deleted there and in the destination
    d3 = write_csv(tmp_path / "d3.csv", ["id", "rev", "name"], [["a", "1", "x"], ["b", "1", "y"]])
    again = cli.json("ingest", SRC, str(d3), "--published-at", "2026-08-03")
    assert again["unresolved"] == 1 and again["added"] == 0
    assert cli.json("asof", SRC, "b", "--valid", "2026-08-03T12:00")["status"] == "absent"
    cli("sync", "search", "--live", "--once")
    t = target(record_place)
    try:
        assert held(t, "b") == (1, "M-1", True)
    finally:
        t.close()
    # a strictly newer revision brings it back, in the ledger and the destination
    day(cli, tmp_path, "2026-08-04", [["a", "1", "x"], ["b", "2", "y"]])
    assert cli.json("asof", SRC, "b", "--valid", "2026-08-04T12:00")["status"] == "present"
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        assert held(t, "b") == (2, "M-1", False)
    finally:
        t.close()
    cli("manifest", "create", "now", "--source", SRC)
    assert outcomes(cli.json("sync", "search", "--manifest", "now")) == {"already_current": 2}
    assert cli.json("reconcile", "search", "--manifest", "now")["complete"] is True


def test_without_a_revision_field_deletion_and_return_work_as_before(
    cli: Cli,
    tmp_path: Path,
    record_place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id")
    declare(cli, record_place)
    day(cli, tmp_path, "2026-08-01", [["a", "x"], ["b", "y"]], rev=False)
    cli("sync", "search", "--live", "--once")
    day(cli, tmp_path, "2026-08-02", [["a", "x"]], rev=False)
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        gone = held(t, "b")
        assert gone is not None and gone[2] is True
    finally:
        t.close()
    day(cli, tmp_path, "2026-08-03", [["a", "x"], ["b", "y"]], rev=False)
    assert outcomes(cli.json("sync", "search", "--live", "--once")) == {"accepted": 1}
    t = target(record_place)
    try:
        back = held(t, "b")
        assert back is not None and back[2] is False and back[0] > gone[0]
    finally:
        t.close()
    cli("manifest", "create", "now", "--source", SRC)
    cli("sync", "search", "--manifest", "now")
    assert cli.json("reconcile", "search", "--manifest", "now")["complete"] is True
