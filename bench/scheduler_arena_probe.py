"""What a scheduler holds between runs, and where (bench/README.md, "A scheduler's memory
between runs"): a `Scheduler` in this process (a fake clock, one tick a day) over
`--sources` folder sources of tests/scheduler/fleet.py's payloads (7 CSV, 2 GeoJSON,
1 GeoPackage of every 10; SQLite store, folder archive), `--days` days; after each day's tick
(every attempt over: between runs) this process's RSS, its mappings by kind (libraries,
anonymous, the heap), glibc's arenas (`mallinfo2`: held, in use, free) and the diff
states held warm.

    python bench/scheduler_arena_probe.py --sources 30 --parcels 20000 --days 3

Before/after a change of the allocators' handling, run it on each tree (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import io
import json
import re
import shutil
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from feedledger.config import Workspace, make_source  # noqa: E402
from feedledger.model.timeutil import parse_instant, to_us  # noqa: E402
from feedledger.scheduler.loop import Options, Scheduler  # noqa: E402
from helpers import migrate  # noqa: E402
from scheduler.fleet import EXT, csv_bytes, geojson_bytes, kind_of, write_gpkg  # noqa: E402

MIB = 1 << 20


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (f, ctypes.c_size_t)
        for f in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def now_us(self) -> int:
        return self.now

    def sleep(self, seconds: float, stop: Any) -> None:
        self.now += int(seconds * 1e6)


def mappings() -> dict[str, int]:
    """Resident MiB by kind of mapping (/proc/self/smaps)."""
    by: collections.Counter[str] = collections.Counter()
    kind = "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "anon"
                kind = ("lib" if ".so" in name else "file") if name.startswith("/") else name
            elif line.startswith("Rss:"):
                by[kind] += int(line.split()[1])
    return {k: v // 1024 for k, v in by.most_common(4)}


def rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 // MIB


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sources", type=int, default=30)
    p.add_argument("--parcels", type=int, default=20_000)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-warm-sources", type=int, default=8)
    args = p.parse_args()
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    root = Path(tempfile.mkdtemp(prefix="arena-probe-"))
    try:
        ws = Workspace.create(
            root / "ws", store_url=f"sqlite:///{root}/ledger.db", archive=str(root / "archive")
        )
        migrate(ws.store_url)
        names = []
        for i in range(args.sources):
            # the fleet's mix (tests/scheduler/fleet.py), an ArcGIS layer's a CSV folder here
            kind, name = kind_of(i).replace("arcgis", "csv"), f"c{i:03d}"
            folder = root / "feed" / name
            folder.mkdir(parents=True)
            options: dict[str, Any] = {"key": ("parcel_id",), "fetch": str(folder)}
            options.update(format=kind, retry_s=1.0)
            if kind == "gpkg":
                options["layer"] = "parcels"
            ws.add_source(make_source(name, **options))
            names.append((name, kind))
        first = date(2026, 8, 1)
        sched: Scheduler | None = None
        for d in range(args.days):
            day = first + timedelta(days=d)
            for name, kind in names:
                path = root / "feed" / name / f"{name}_{day.isoformat()}.{EXT[kind]}"
                if kind == "gpkg":
                    write_gpkg(path, args.parcels, day)
                else:
                    make = csv_bytes if kind == "csv" else geojson_bytes
                    path.write_bytes(make(args.parcels, day))
            now = to_us(parse_instant(f"{day + timedelta(days=1)}T01:00", "UTC"))
            if sched is None:
                options_ = Options(
                    workers=args.workers,
                    dispatch=False,
                    max_warm_sources=args.max_warm_sources,
                )
                sched = Scheduler(ws.config_path, options_, Clock(now), io.StringIO())
            else:
                assert isinstance(sched.clock, Clock)
                sched.clock.now = now
            sched.tick(wait=True)
            info = libc.mallinfo2()
            assert isinstance(sched.log, io.StringIO) and sched.cache.warm is not None
            lines = [json.loads(x) for x in sched.log.getvalue().splitlines()]
            out = {
                "day": d + 1,
                "rss_mib": rss_mib(),
                "mappings_mib": mappings(),
                "glibc_arenas_mib": info.arena // MIB,
                "glibc_in_use_mib": info.uordblks // MIB,
                "glibc_free_mib": info.fordblks // MIB,
                "warm_mib": round(sched.cache.warm.bytes_held / MIB, 1),
                "outcomes": collections.Counter(x["outcome"] for x in lines if x["event"] == "run"),
            }
            print(json.dumps(out), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
