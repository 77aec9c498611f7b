"""Snapshot export benchmark: a GIS source exported as CSV, JSON lines, GeoJSON,
GeoParquet and GeoPackage; time and peak memory of each export process.

    python bench/snapshot_bench.py [--n 20000 80000] [--keep DIR]

For each N: N parcel polygons (8 vertices, 6 typed properties) in one GeoJSON file,
ingested into a fresh SQLite workspace (`source add parcels --format geojson`), then
`snapshot --valid ... --format F -o FILE` run once per format as its own process. It
prints wall seconds and the process's peak RSS (ru_maxrss of the child). The exports
stream (GeoJSON feature by feature; GeoParquet/GeoPackage a batch at a time from a
spool), so peak RSS should stay about flat as N grows while time grows linearly.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMATS = ("csv", "jsonl", "geojson", "geoparquet", "gpkg")
EXT = {"geoparquet": "parquet"}


def write_features(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write('{"type":"FeatureCollection","features":[\n')
        for i in range(n):
            x, y = -105.0 + (i % 1000) * 1e-3, 40.0 + (i // 1000) * 1e-3
            ring = [
                [
                    round(x + 4e-4 * math.cos(k * math.pi / 4), 6),
                    round(y + 4e-4 * math.sin(k * math.pi / 4), 6),
                ]
                for k in range(8)
            ]
            ring.append(ring[0])
            props = {
                "parcel_id": f"P{i:08d}",
                "zoning": ("R-1", "R-2", "MU", "C")[i % 4],
                "owner": f"Owner {i % 997}",
                "acres": round(0.1 + (i % 50) / 7, 3),
                "assessed": 100_000 + i,
                "flood": i % 9 == 0,
            }
            feature = {
                "type": "Feature",
                "properties": props,
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
            out.write(("," if i else "") + json.dumps(feature, separators=(",", ":")) + "\n")
        out.write("]}\n")


def run(exe: list[str], args: list[str], cwd: Path) -> float:
    """Wall seconds of one feedledger process."""
    start = time.perf_counter()
    subprocess.run([*exe, *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench(n: int, root: Path) -> list[dict[str, object]]:
    root.mkdir(parents=True, exist_ok=True)
    exe = [sys.executable, "-m", "feedledger"]
    data = root / "parcels.geojson"
    write_features(data, n)
    subprocess.run([*exe, "init"], cwd=root, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [*exe, "source", "add", "parcels", "--key", "parcel_id", "--format", "geojson"],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    ingest = ["ingest", "parcels", str(data), "--published-at", "2026-08-01"]
    wall = run(exe, ingest, root)
    results: list[dict[str, object]] = [{"n": n, "step": "ingest", "seconds": round(wall, 2)}]
    for fmt in FORMATS:
        out = root / f"snap.{EXT.get(fmt, fmt)}"
        args = ["snapshot", "parcels", "--valid", "2026-08-01", "--format", fmt, "-o", str(out)]
        # each export in its own child so its peak RSS is its own
        wall, rss = _isolated(exe, args, root)
        results.append(
            {
                "n": n,
                "step": fmt,
                "seconds": round(wall, 2),
                "peak_rss_mib": round(rss, 1),
                "bytes": out.stat().st_size,
            }
        )
    return results


def _isolated(exe: list[str], args: list[str], cwd: Path) -> tuple[float, float]:
    code = (
        "import resource,subprocess,sys,time,json;s=time.perf_counter();"
        f"subprocess.run({[*exe, *args]!r},cwd={str(cwd)!r},check=True,stdout=subprocess.DEVNULL);"
        "w=time.perf_counter()-s;"
        "print(json.dumps([w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024]))"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    wall, rss = json.loads(done.stdout)
    return float(wall), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[20_000, 80_000])
    parser.add_argument("--keep", type=Path, default=None)
    opts = parser.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="fl-snapbench-"))
    rows = []
    for n in opts.n:
        rows += bench(n, base / f"n{n}")
    print(f"{'n':>8} {'step':>10} {'seconds':>8} {'peak MiB':>9} {'bytes':>12}")
    for r in rows:
        print(
            f"{r['n']:>8} {r['step']:>10} {r['seconds']:>8} "
            f"{r.get('peak_rss_mib', ''):>9} {r.get('bytes', ''):>12}"
        )
    if opts.keep is None:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
