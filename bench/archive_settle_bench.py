"""What compressing an ingest's raw object costs (`archive/settle.py`), alone, paired
between two source trees::

    python bench/archive_settle_bench.py --data /work/data/n1m --before /tmp/base/src \\
        --after src --rounds 6

An archive is prepared once (with the AFTER tree): days 1 and 2 of the folder's parcel
snapshots archived and settled, so day 2 is the source's base and in its base cache.
Then, for each round and each tree (the order alternating), a fresh process copies that
archive, stores day 3 raw and archives it as a publication (`put_object(...,
later=True)`, `put`, as an ingest does), drops its own reference to the bytes where the
tree's `settle` does not take them, and times `settle` alone: wall, CPU (user + sys of
the process over the call) and the growth of its peak RSS over its RSS just before the
call (what settling adds to an ingest); and the raw object's store before it (wall, CPU
of `put_object`), written the way the tree writes it (O_DIRECT for a large payload),
since a tree that reads it back pays for how it was written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import inspect, json, os, resource, shutil, sys, time
from pathlib import Path
from feedledger.archive import LocalArchive

prepared, work, day3, at = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
shutil.copytree(prepared, work)
archive = LocalArchive(work)
data = day3.read_bytes()
s0, c0 = time.perf_counter(), time.process_time()
sha = archive.put_object(data, "parcels", later=True)
store_wall, store_cpu = time.perf_counter() - s0, time.process_time() - c0
archive.put("parcels", data, published_at=at, fetched_at=at, sha256=sha)
takes_data = "data" in inspect.signature(archive.settle).parameters
args = ("parcels", sha, data, at) if takes_data else ("parcels", sha, at)
if not takes_data:
    del data
del args  # rebuilt below: the only reference to the bytes is `data` (old tree)
os.sync()


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


before_rss = rss_mib()
t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
if takes_data:
    done = archive.settle("parcels", sha, data, at)
else:
    done = archive.settle("parcels", sha, at)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
peak = r1.ru_maxrss / 1024
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
stored = archive.objects.stored(sha)
print(json.dumps({"wall": wall, "cpu": cpu, "store_wall": store_wall,
                  "store_cpu": store_cpu, "rss_before": before_rss, "peak": peak,
                  "growth": peak - before_rss, "done": len(done),
                  "encoding": stored.encoding if stored else None}))
"""


def day(data: Path, n: int) -> Path:
    return sorted(data.glob("parcels_*.csv"))[n]


def prepare(tree: Path, data: Path, root: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from feedledger.archive import LocalArchive\n"
        "a = LocalArchive(Path(sys.argv[1]))\n"
        "for i, p in enumerate(sys.argv[2:]):\n"
        "    b = Path(p).read_bytes(); at = 1_786_000_000_000_000 + i * 86_400_000_000\n"
        "    s = a.put_object(b, 'parcels', later=True)\n"
        "    a.put('parcels', b, published_at=at, fetched_at=at, sha256=s)\n"
        "    a.settle('parcels', s, at)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", code, str(root), str(day(data, 0)), str(day(data, 1))]
    subprocess.run(argv, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/work/data/n1m"))
    parser.add_argument("--before", type=Path, required=True, help="the old tree's src")
    parser.add_argument("--after", type=Path, default=Path(__file__).parents[1] / "src")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    at = 1_786_000_000_000_000 + 2 * 86_400_000_000
    with tempfile.TemporaryDirectory(prefix="archive_settle.") as tmp:
        prepared = Path(tmp) / "prepared"
        prepare(trees["after"], args.data, prepared)
        for r in range(args.rounds):
            names = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in names:
                work = Path(tmp) / "run"
                shutil.rmtree(work, ignore_errors=True)
                env = {**os.environ, "PYTHONPATH": str(trees[name])}
                argv = [sys.executable, "-c", CHILD, str(prepared), str(work)]
                argv += [str(day(args.data, 2)), str(at)]
                out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["load"] = os.getloadavg()[0]
                results[name].append(row)
                print(
                    f"{name:6} round={r + 1} wall={row['wall']:.3f} cpu={row['cpu']:.3f} "
                    f"store_wall={row['store_wall']:.3f} store_cpu={row['store_cpu']:.3f} "
                    f"growth_mib={row['growth']:.0f} peak_mib={row['peak']:.0f} "
                    f"{row['encoding']} load={row['load']:.1f}",
                    flush=True,
                )
    for name, rows in results.items():
        keys = ("wall", "cpu", "store_wall", "store_cpu", "growth")
        med = {k: statistics.median(r[k] for r in rows) for k in keys}
        print(
            f"median {name:6} settle wall={med['wall']:.3f} cpu={med['cpu']:.3f} "
            f"growth_mib={med['growth']:.0f}, raw store wall={med['store_wall']:.3f} "
            f"cpu={med['store_cpu']:.3f} (n={len(rows)})"
        )


if __name__ == "__main__":
    main()
