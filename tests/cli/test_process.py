"""The `feedledger` process itself: what a command imports, how it ends, and the SQLite
write-ahead log it leaves for the next writer (Store.close(leave_wal=True))."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from feedledger.config import Workspace
from feedledger.ledger.store import WAL_LEAVE_MAX, Store
from helpers import Cli, write_csv

HEADER = ["id", "zoning"]


def _payload(tmp_path: Path, day: int, rows: list[list[str]]) -> Path:
    return write_csv(tmp_path / f"p_2026-08-{day:02d}.csv", HEADER, rows)


def _ingest(cli: Cli, path: Path, day: int) -> dict[str, object]:
    proc = cli.proc("ingest", "p", str(path), "--published-at", f"2026-08-{day:02d}", "--json")
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_cli_import_leaves_store_driver_for_later() -> None:
    """`feedledger` starts without SQLAlchemy, so `ingest` can import it on a second
    thread while it parses (and `--help` stays quick)."""
    code = (
        "import sys, feedledger.cli.main, feedledger.pipeline.intake.ingest\n"
        "heavy = [m for m in ('sqlalchemy', 'psycopg', 'alembic') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.strip() == ""


def test_exit_codes_and_output_survive_the_fast_exit(cli: Cli, tmp_path: Path) -> None:
    cli.proc("source", "add", "p", "--key", "id")
    ok = _ingest(cli, _payload(tmp_path, 1, [["1", "R1"]]), 1)
    assert ok["status"] == "applied"
    stale = cli.proc(
        "ingest", "p", str(_payload(tmp_path, 1, [["1", "R2"]])), "--published-at", "2026-07-01"
    )
    assert stale.returncode == 6
    assert "watermark" in stale.stderr
    unknown = cli.proc("history", "nope", "1", "--json")
    assert unknown.returncode == 3
    assert unknown.stdout == ""
    usage = cli.proc("ingest")
    assert usage.returncode == 2


def test_sqlite_log_left_by_one_process_is_checkpointed_by_the_next_writer(
    tmp_path: Path,
) -> None:
    ws = Workspace.create(tmp_path / "ws", store_url=None, archive=None)
    cli = Cli(ws)
    assert cli.proc("db", "upgrade").returncode == 0
    assert cli.proc("source", "add", "p", "--key", "id").returncode == 0
    db = Path(Store(ws.store_url, check=False).engine.url.database or "")
    wal = db.with_name(db.name + "-wal")

    _ingest(cli, _payload(tmp_path, 1, [[str(i), "R1"] for i in range(200)]), 1)
    # the process ended without checkpointing: its commit is in the log, durable
    first_log = wal.stat().st_size if wal.exists() else 0
    assert 0 < first_log <= WAL_LEAVE_MAX
    # a reader in another process sees it
    hist = cli.proc("history", "p", "7", "--json")
    assert json.loads(hist.stdout)[0]["attributes"] == {"id": "7", "zoning": "R1"}

    # The next writer checkpoints the log while it parses, so its own commit restarts
    # the log from the top instead of appending: the log does not grow day by day.
    second = _ingest(cli, _payload(tmp_path, 2, [[str(i), "R2"] for i in range(200)]), 2)
    assert second["changed"] == 200
    assert wal.stat().st_size < 1.5 * first_log
    assert cli.proc("verify", "p").returncode == 0
    assert [
        v["attributes"]["zoning"]
        for v in json.loads(cli.proc("history", "p", "7", "--json").stdout)
    ] == ["R1", "R2"]


@pytest.mark.parametrize("leave", [False, True])
def test_store_close_checkpoints_unless_leaving_the_log(tmp_path: Path, leave: bool) -> None:
    ws = Workspace.create(tmp_path / "ws", store_url=None, archive=None)
    assert Cli(ws).proc("db", "upgrade").returncode == 0
    store = Store(ws.store_url)
    with store.begin() as conn:
        conn.exec_driver_sql("INSERT INTO counters (name, value) VALUES ('probe', 1)")
    assert store.wal_bytes() > 0
    store.close(leave_wal=leave)
    # closing checkpoints and SQLite's last close removes the log; leaving it keeps it
    assert (store.wal_bytes() > 0) is leave
    store.engine.dispose()  # what the ending process does implicitly
    other = Store(ws.store_url)
    try:
        with other.begin() as conn:
            assert conn.exec_driver_sql("SELECT value FROM counters WHERE name='probe'").one()
    finally:
        other.close()
