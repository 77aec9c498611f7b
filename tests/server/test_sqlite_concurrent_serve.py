"""An SQLite store under `serve` and two other processes at once stays whole.

`serve` streams snapshots and takes token writes while a second process ingests (each
ingest in a ledger opened and closed again: the close of the last connection is when
SQLite checkpoints and deletes the WAL) and a third reads snapshots. Afterwards
`PRAGMA integrity_check` says ok, every write `serve` answered 200 is in the write
audit, and every ingest the second process finished is in the ledger.

With two SQLite libraries in `serve` (the ADBC driver's read the snapshots), the
driver's close() dropped the locks of the process's other connections: another process
then believed it closed the last connection, checkpointed and deleted the WAL under
`serve`, whose later writes went to the deleted file, answered 200 and were lost
(or failed as "database disk image is malformed"). Bounded by counts, not time; every
process on 127.0.0.1 and in a temporary folder.
"""

from __future__ import annotations

import datetime
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import feedledger as fl
from feedledger.config import Workspace
from helpers import migrate, start_serve
from ledger.sqlite_mappings import sqlite_engines

ROWS = 2000  # entities of the snapshot source
SNAPSHOTS = 10  # streamed by serve
WRITES = 24  # token writes to serve (freeze / thaw, alternately)
INGESTS = 6  # by the second process, a day each
READS = 6  # snapshots read by the third process
TOKEN = "st0ken"

_INGESTER = textwrap.dedent(
    """
    import sys
    import feedledger as fl

    config, count = sys.argv[1], int(sys.argv[2])
    for day in range(1, count + 1):
        with fl.open(config) as led:  # closed each time: its last connection too
            body = "id,v\\n" + "".join(f"{i},i{i}-{day}\\n" for i in range(300))
            led.source("i").ingest(body.encode(), published_at=f"2026-08-{day:02d}",
                                   name=f"i{day}.csv")
        print("ack", day, flush=True)
    """
)

_READER = textwrap.dedent(
    """
    import datetime, sys
    import feedledger as fl

    config, count, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for k in range(count):
        with fl.open(config) as led:
            got = led.source("s").snapshot(valid=datetime.date(2026, 8, 2))
        assert got.height == rows, got.height
        print("read", k, flush=True)
    """
)


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    migrate(ws.store_url)
    with fl.open(ws.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        body = "id,v\n" + "".join(f"{i},v{i}\n" for i in range(ROWS))
        src.ingest(body.encode(), published_at="2026-08-01", name="s.csv")
        led.add_source("i", key=["id"], timezone="UTC", hold_factor=1e9)
        led.add_source("w", key=["id"], timezone="UTC")
    return ws


def _wait(url: str) -> None:
    for _ in range(600):
        try:
            httpx.get(url + "/api/health", timeout=5)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("serve never answered")


def test_serve_snapshots_and_writes_beside_an_ingester_and_a_reader(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    proc, url = start_serve(
        ws, "--token-env", "FL_TEST_TOKENS", env={"FL_TEST_TOKENS": f"ops:{TOKEN}"}
    )
    acked: list[tuple[int, str]] = []  # (audit id, action) of each write answered 200
    streamed: list[int] = []
    problems: list[str] = []
    others: list[subprocess.Popen[str]] = []
    try:
        _wait(url)
        config = str(ws.config_path)
        others = [
            subprocess.Popen([sys.executable, "-c", _INGESTER, config, str(INGESTS)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
            subprocess.Popen([sys.executable, "-c", _READER, config, str(READS), str(ROWS)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        ]  # fmt: skip

        def snapshots() -> None:
            for _ in range(SNAPSHOTS):
                with httpx.stream(
                    "GET", url + "/api/sources/s/snapshot?valid=2026-08-02&format=jsonl", timeout=60
                ) as r:
                    if r.status_code != 200:
                        problems.append(f"snapshot {r.status_code}: {r.read()[:200]!r}")
                        continue
                    streamed.append(sum(chunk.count(b"\n") for chunk in r.iter_bytes()))

        def writes() -> None:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            for k in range(WRITES):
                action = "freeze" if k % 2 == 0 else "thaw"
                r = httpx.post(f"{url}/api/sources/w/{action}", headers=auth, timeout=60)
                if r.status_code == 200:
                    acked.append((r.json()["audit"]["audit_id"], action))
                else:
                    problems.append(f"{action} {r.status_code}: {r.text[:200]}")

        threads = [threading.Thread(target=snapshots), threading.Thread(target=writes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        outs = [p.communicate(timeout=120) for p in others]
        # and serve, having streamed snapshots and written, has one SQLite library
        serve_engines = sqlite_engines(Path(f"/proc/{proc.pid}/maps").read_text())
    finally:
        for p in others:
            if p.poll() is None:
                p.kill()
        proc.send_signal(signal.SIGTERM)
        _, serve_err = proc.communicate(timeout=30)
    assert proc.returncode == 0, serve_err
    for p, (_out, err) in zip(others, outs, strict=True):
        assert p.returncode == 0, err
    ingested = [int(line.split()[1]) for line in outs[0][0].splitlines() if line.startswith("ack")]
    assert ingested == list(range(1, INGESTS + 1))
    assert len(outs[1][0].splitlines()) == READS
    assert not problems, problems
    assert streamed == [ROWS] * SNAPSHOTS
    assert len(acked) == WRITES
    assert len(serve_engines) == 1, serve_engines

    db = sqlite3.connect(tmp_path / "l.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()
    with fl.open(ws.config_path) as led:
        audit: dict[int, Any] = {e.audit_id: e.action for e in led.audit_entries(source="w")}
        # every write answered 200 is there, as answered
        assert {a: audit.get(a) for a, _ in acked} == dict(acked)
        src = led.source("i")
        for day in ingested:  # every finished ingest, each day's values as stated
            got = src.snapshot(valid=datetime.date(2026, 8, day))
            assert got.height == 300
            assert sorted(got.get_column("v").to_list()) == sorted(
                f"i{i}-{day}" for i in range(300)
            )
