"""One SQLite library per process: a process that ingests (through the staged scratch
files of a large payload) and reads a snapshot (the Arrow batch fetch) has exactly one
SQLite engine mapped, the one the sqlite3 module (and so SQLAlchemy) uses.

Two copies in one process corrupt the store ("How To Corrupt An SQLite Database File",
2.2.1): POSIX advisory locks are per process, so one copy's close() of `ledger.db` or its
`-shm` drops the other copy's locks, and a process that then believes it holds the last
connection checkpoints and deletes the WAL under the other. The ADBC SQLite driver's
shared object links a SQLite of its own, statically; it was loaded by both paths.

An engine is recognised by the magic text of its file header, "SQLite format 3\\0",
which every SQLite build carries (it writes and checks it on every database) and a
wrapper such as the `_sqlite3` extension module does not: so a second copy is found
whatever package brings it, statically linked or not. (GDAL, which reads a GeoPackage
payload, links one too: it opens only the payload's file, never `ledger.db`, and the
locks are per file; a CSV source never loads it.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from ledger.sqlite_mappings import sqlite_engines

_SCRIPT = textwrap.dedent(
    """
    import datetime, json, sys
    from pathlib import Path

    import feedledger as fl
    from feedledger.ledger import bulk, staging

    # every payload staged through scratch files, a file per chunk
    bulk.STAGE_MIN_ROWS = 1
    staging.FILE_ROWS = 100
    root = Path(sys.argv[1])
    with fl.init(root / "ws") as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        for day in (1, 2):
            body = "id,v\\n" + "".join(f"{i},v{i}-{day}\\n" for i in range(300))
            src.ingest(body.encode(), published_at=f"2026-08-0{day}", name=f"s{day}.csv")
        rows = sum(b.num_rows for b in src.snapshot_batches(valid=datetime.date(2026, 8, 3)))
        frame = src.snapshot(valid=datetime.date(2026, 8, 3))
        with open("/proc/self/maps") as f:
            maps = f.read()
    print(json.dumps({"rows": rows, "height": frame.height, "maps": maps}))
    """
)


def test_one_sqlite_library_after_an_ingest_and_a_snapshot(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["rows"] == found["height"] == 300
    engines = sqlite_engines(found["maps"])
    # exactly one engine: the sqlite3 module's (never zero: the detector works)
    assert len(engines) == 1, engines
    assert not any("adbc" in name for name in engines)
