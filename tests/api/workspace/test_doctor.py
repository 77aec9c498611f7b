"""`Ledger.doctor`: a healthy workspace has no finding, and each kind of finding is found
when it is planted -- a tampered state cache, an archive object corrupted or removed, a
lease of a gone process or expired, a dead letter, a destination behind or
unreconciled, a stale source, the schema behind head, low disk -- on SQLite and
PostgreSQL (PostgreSQL's settings: tests/api/test_doctor_postgres.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import text

import feedledger as fl
from feedledger.api.workspace.doctor import CHECK_NAMES, DoctorReport
from feedledger.config import Workspace
from feedledger.ledger import engine as eng
from feedledger.pipeline.doctor.findings import CHECKS
from helpers import Cli, MakeSource, migrate

DAY1 = "2026-08-01"
# noon of the day after the last publication: nothing is due yet, nothing is stale
SOON = datetime(2026, 8, 2, 12, tzinfo=UTC)


def _csv(tmp_path: Path, day: str, rows: int = 3, zoning: str = "A") -> Path:
    path = tmp_path / f"larimer_{day}.csv"
    body = "".join(f"{i},{zoning}{i}\n" for i in range(rows))
    path.write_text("parcel_id,zoning\n" + body, encoding="utf-8")
    return path


@pytest.fixture
def ingested(cli: Cli, make_source: MakeSource, tmp_path: Path) -> Workspace:
    """A workspace with one source `larimer` (daily) and two days ingested."""
    make_source("larimer")
    cli("ingest", "larimer", str(_csv(tmp_path, "2026-07-31")))
    cli("ingest", "larimer", str(_csv(tmp_path, DAY1, zoning="B")))
    return cli.ws


def _doctor(ws: Workspace, **options: Any) -> DoctorReport:
    options.setdefault("at", SOON)
    if ws.store_url.startswith("postgresql"):
        # the test server runs PostgreSQL's defaults: its settings are judged in
        # test_doctor_postgres.py, on a session that sets them
        options["skip"] = [*options.get("skip", []), "postgres_settings"]
    with fl.open(ws.config_path) as led:
        return led.doctor(**options)


def _codes(report: DoctorReport) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in report.findings]


@pytest.fixture
def sql(ingested: Workspace) -> Iterator[Any]:
    """Run one statement on the workspace's store (planting what the test needs)."""
    engine = eng.make_engine(ingested.store_url)

    def run(statement: str, **params: Any) -> None:
        with engine.begin() as conn:
            conn.execute(text(statement), params)

    yield run
    engine.dispose()


def test_a_healthy_workspace_has_no_finding(ingested: Workspace) -> None:
    report = _doctor(ingested)
    assert report.ok and report.findings == [], _codes(report)
    ran = {c.check: c.status for c in report.checks}
    assert list(ran) == list(CHECK_NAMES) == list(CHECKS)
    assert ran["state_cache"] == ran["archive"] == ran["schema"] == "ok"
    assert ran["postgres_settings"] == "skipped"  # SQLite, or left out above
    assert report.to_json()["ok"] is True


def test_a_tampered_state_cache_is_found_and_named(ingested: Workspace) -> None:
    (cache,) = (ingested.state_dir / "state").glob("larimer.*.arrow")
    frame = pl.read_ipc(cache)
    first = (pl.int_range(pl.len()) == 0).cast(pl.Int64)  # one entity's hash changed
    frame.with_columns(pl.col("hash") + first).write_ipc(cache)
    report = _doctor(ingested)
    assert _codes(report) == [("state_cache_mismatch", "larimer")]
    (f,) = report.findings
    assert f.severity == "error" and "1 different" in f.what and "whole" in f.what
    assert f.fix.startswith("rm ") and "larimer.*.arrow" in f.fix and "verify larimer" in f.fix


def _object(ws: Workspace) -> Path:
    """The archive object of the newest payload (compressed or raw)."""
    found = sorted(Path(ws.archive_location, "objects").rglob("*"), key=lambda p: p.stat().st_mtime)
    return [p for p in found if p.is_file()][-1]


def test_a_corrupted_archive_object_is_found(ingested: Workspace) -> None:
    obj = _object(ingested)
    data = bytearray(obj.read_bytes())
    data[-5] ^= 0xFF
    obj.chmod(0o644)
    obj.write_bytes(bytes(data))
    report = _doctor(ingested)
    assert _codes(report) == [("archive_object_bad", "larimer")]
    assert "feedledger archive verify larimer" in report.findings[0].fix


def test_a_removed_archive_object_is_found_with_full_too(ingested: Workspace) -> None:
    for obj in Path(ingested.archive_location, "objects").rglob("*"):
        if obj.is_file():
            obj.unlink()
    sampled = _doctor(ingested, sample=1)  # the newest only
    assert _codes(sampled) == [("archive_object_bad", "larimer")]
    whole = _doctor(ingested, full=True)
    assert _codes(whole) == [("archive_object_bad", "larimer")] * 2
    assert next(c for c in whole.checks if c.check == "archive").note.startswith("every")


def _gone_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    return int(proc.stdout)


_OUT: dict[str, Any] = {"capture_output": True, "text": True, "check": True}


def test_a_lease_of_a_gone_process_is_found(ingested: Workspace, sql: Any) -> None:
    holder = f"{socket.gethostname()}:{_gone_pid()}:feedface:"
    far = int(SOON.timestamp() * 1e6) + 600_000_000  # not expired: only its process is gone
    sql(
        "UPDATE leases SET holder = :h, run_id = 'r-gone', expires_at = :e, heartbeat_at = 0 "
        "WHERE source = 'larimer'",
        h=holder,
        e=far,
    )
    report = _doctor(ingested)
    assert _codes(report) == [("lease_orphaned", "larimer")]
    assert "gone" in report.findings[0].what and "r-gone" in report.findings[0].what


def test_an_expired_lease_of_another_host_is_found_a_live_one_is_not(
    ingested: Workspace, sql: Any
) -> None:
    until = int(SOON.timestamp() * 1e6)
    set_lease = (
        "UPDATE leases SET holder = 'elsewhere:1:t:', run_id = 'r-x', expires_at = :e "
        "WHERE source = 'larimer'"
    )
    sql(set_lease, e=until + 60_000_000)  # renewed: expires after SOON
    assert _doctor(ingested).ok
    sql(set_lease, e=until - 60_000_000)
    report = _doctor(ingested)
    assert _codes(report) == [("lease_orphaned", "larimer")]
    assert "expired" in report.findings[0].what


def test_a_dead_letter_is_found(ingested: Workspace, sql: Any, tmp_path: Path) -> None:
    with fl.open(ingested.config_path) as led:
        led.notify.add_subscriber("ops", file=tmp_path / "hook.jsonl", sources=["larimer"])
    Cli(ingested)("ingest", "larimer", str(_csv(tmp_path, "2026-08-02", zoning="C")))
    with fl.open(ingested.config_path) as led:
        assert led.notify.dispatch(once=True).delivered > 0
    sql("UPDATE deliveries SET status = 'dead' WHERE source = 'larimer'")
    report = _doctor(ingested, at=datetime(2026, 8, 3, 12, tzinfo=UTC))
    assert _codes(report) == [("dead_letters", "larimer")]
    assert "notify retry" in report.findings[0].fix


def test_a_destination_behind_is_found_after_the_threshold(
    ingested: Workspace, tmp_path: Path
) -> None:
    with fl.open(ingested.config_path) as led:
        led.add_destination("search", source="larimer", table="parcels", sqlite=tmp_path / "d.db")
    Cli(ingested)("ingest", "larimer", str(_csv(tmp_path, "2026-08-02", zoning="C")))
    now = datetime.now(UTC)
    assert _doctor(ingested, at=now, skip=["stale_sources"]).ok  # just written: in flight
    later = datetime.fromtimestamp(now.timestamp() + 7200, UTC)
    report = _doctor(ingested, at=later, skip=["stale_sources"])
    assert _codes(report) == [("destination_behind", "search")]
    assert report.findings[0].fix == "feedledger sync search --live --once"


def test_an_incomplete_reconcile_is_found(ingested: Workspace, tmp_path: Path) -> None:
    with fl.open(ingested.config_path) as led:
        dest = led.add_destination(
            "search", source="larimer", table="parcels", sqlite=tmp_path / "d.db"
        )
        led.create_manifest("m1", source="larimer")
        assert not dest.reconcile("m1").complete  # never synced: every key missing
    report = _doctor(ingested)
    assert _codes(report) == [("destination_unreconciled", "search")]
    assert "feedledger reconcile search --manifest m1" in report.findings[0].fix


def test_a_source_stale_by_cadence_is_found(ingested: Workspace) -> None:
    report = _doctor(ingested, at=datetime(2026, 8, 9, 12, tzinfo=UTC))
    assert _codes(report) == [("source_stale", "larimer")]
    assert "missed" in report.findings[0].what and "ingest larimer" in report.findings[0].fix


@pytest.mark.parametrize(
    ("plant", "code"),
    [
        ("UPDATE alembic_version SET version_num = '0012_decoded_changes'", "schema_behind"),
        ("UPDATE alembic_version SET version_num = '0099_from_a_later_release'", "schema_ahead"),
        (
            "UPDATE alembic_version SET version_num = '0099_from_a_later_release';"
            "UPDATE schema_floor SET floor = '0099_from_a_later_release'",
            "schema_ahead",
        ),
        ("DELETE FROM alembic_version", "schema_missing"),
    ],
)
def test_a_schema_not_at_head_is_found_and_the_store_checks_wait(
    ingested: Workspace, sql: Any, plant: str, code: str
) -> None:
    for statement in plant.split(";"):
        sql(statement)
    report = _doctor(ingested)
    assert [f.code for f in report.findings] == [code]
    assert report.findings[0].severity == "error"
    if code == "schema_ahead":  # a newer schema's floor says whether this release runs on it
        runs = "still runs on it" in report.findings[0].why
        assert runs == ("schema_floor" not in plant), report.findings[0].why
    if code != "schema_ahead":
        assert report.findings[0].fix == "feedledger db upgrade"
    skipped = {c.check for c in report.checks if c.status == "skipped"}
    assert {"state_cache", "leases", "dead_letters", "destinations", "stale_sources"} <= skipped
    assert {c.check: c.status for c in report.checks}["archive"] == "ok"  # no store needed


def test_a_watermark_ahead_of_the_clock_is_a_publisher_date_finding(
    ingested: Workspace,
) -> None:
    report = _doctor(ingested, at=datetime(2026, 7, 20, tzinfo=UTC))  # before DAY1
    assert _codes(report) == [("publisher_date", "larimer")]
    assert "ahead of the clock" in report.findings[0].what


def test_an_interrupted_rebuild_is_found(
    ingested: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fl.open(ingested.config_path) as led:
        dest = led.add_destination(
            "search", source="larimer", table="parcels", sqlite=tmp_path / "d.db"
        )
        led.create_manifest("m1", source="larimer")
        monkeypatch.setenv("FEEDLEDGER_FAULT", "after_checkpoint:1")
        with pytest.raises(RuntimeError, match="after_checkpoint"):
            dest.rebuild("m1", batch=1)
        monkeypatch.delenv("FEEDLEDGER_FAULT")
    report = _doctor(ingested)
    assert _codes(report) == [("destination_rebuild_unfinished", "search")]
    assert report.findings[0].fix.startswith("feedledger sync search --manifest m1")


def test_low_disk_is_found_under_a_forced_threshold(ingested: Workspace) -> None:
    report = _doctor(ingested, min_free_bytes=1 << 60)
    places = 1 if ingested.store_url.startswith("postgresql") else 2  # the store's too
    assert [f.code for f in report.findings] == ["disk_low"] * places
    assert Path(report.findings[-1].subject) == Path(ingested.archive_location)


def test_an_unknown_check_to_skip_is_refused(ingested: Workspace) -> None:
    with pytest.raises(fl.ConfigError, match="no check named bogus"):
        _doctor(ingested, skip=["bogus"])


def test_an_s3_archive_is_read_back_and_its_disk_not_checked(
    store_url: str, s3_bucket: str, tmp_path: Path, s3_fs: Any
) -> None:
    ws = Workspace.create(tmp_path / "s3ws", store_url=store_url, archive=f"s3://{s3_bucket}/a")
    migrate(ws.store_url)
    cli = Cli(ws)
    cli("source", "add", "larimer", "--key", "parcel_id")
    cli("ingest", "larimer", str(_csv(tmp_path, DAY1)))
    report = _doctor(ws)
    assert report.ok, _codes(report)
    notes = {c.check: c.note for c in report.checks}
    assert "archive: not checked (object storage)" in notes["disk"]
    assert notes["archive"].startswith("sampled (1 payloads")
    for key in s3_fs.find(f"{s3_bucket}/a/objects"):
        s3_fs.rm(key)
    assert _codes(_doctor(ws)) == [("archive_object_bad", "larimer")]
