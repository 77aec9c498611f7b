"""The GeoPackage destination's guarded write against the SQLite table's, in-process.

    .venv/bin/python bench/gpkg_bench.py [--n 100000] [--batch 20000]

N parcel-like documents (a small polygon each, three attributes) are written in
batches through each kind's `write_batch` (sync/kinds): a SQLite destination table
(GIS: `geometry_wkb`) and a GeoPackage layer (features + R-tree + gpkg_contents). Then
the same N again (a resync: every one already current), 1,000 moves in batches of 200
(the live route's size), and for the GeoPackage a rebuild's new file: the copy
(`VACUUM INTO`), the N documents written again at a newer generation, and `finish`
(the old file merged through the guard, the swap). The machine is shared and loaded:
each phase is reported in CPU seconds of this process (`time.process_time`, the
SQLite work runs in it), with documents per CPU second, and the file sizes. JSON in
bench/results/gpkg-latest.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import shapely

sys.path.insert(0, str(Path(__file__).resolve().parent))

from feedledger.model.destination import Destination, generation_rank
from feedledger.sync.kinds import open_target
from feedledger.sync.transform import Doc, content_hash
from resultfiles import save_results


def docs(n: int, generation: str, shift: float = 0.0, start: int = 0) -> list[Doc]:
    rank = generation_rank(generation)
    out = []
    for i in range(start, start + n):
        x, y = -105 + (i % 1000) * 1e-3 + shift, 40 + (i // 1000) * 1e-3
        body = {"parcel_id": f"P{i:07d}", "zone": f"R{i % 7}", "acres": (i % 97) / 10}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        wkb = shapely.to_wkb(shapely.box(x, y, x + 8e-4, y + 8e-4), flavor="iso")
        out.append(Doc(json.dumps([body["parcel_id"]]), 1 + int(shift * 1e6), generation, rank,
                       content_hash(text, str(shift)), False, text, wkb))  # fmt: skip
    return out


def phase(name: str, results: dict[str, Any], fn: Any, count: int) -> Any:
    t0 = time.process_time()
    got = fn()
    cpu = time.process_time() - t0
    results[name] = {"cpu_s": round(cpu, 3), "docs": count,
                     "docs_per_cpu_s": round(count / cpu) if cpu else None}  # fmt: skip
    print(f"{name:<34} {cpu:8.2f} CPU s  {count / cpu if cpu else 0:>10,.0f} docs/CPU s",
          file=sys.stderr)  # fmt: skip
    return got


def write_all(target: Any, batch: list[Doc], size: int) -> dict[str, int]:
    tally: dict[str, int] = {}
    for i in range(0, len(batch), size):
        for verdict, k in target.write_batch(batch[i : i + size]).tally().items():
            tally[verdict] = tally.get(verdict, 0) + k
    return tally


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=20_000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpkg_bench_"))
    results: dict[str, Any] = {"n": args.n, "batch": args.batch}
    try:
        first = docs(args.n, "M-1")
        moved = docs(1_000, "M-1", shift=0.5)
        for kind, url in (("sqlite", work / "dest.db"), ("gpkg", work / "parcels.gpkg")):
            dest = Destination("b", "parcels", kind, str(url), "parcels")  # type: ignore[arg-type]
            t = open_target(dest, geo=True)
            t.ensure()
            got = phase(f"{kind}: rebuild (all accepted)", results,
                        lambda t=t: write_all(t, first, args.batch), args.n)  # fmt: skip
            assert got == {"accepted": args.n}, got
            got = phase(f"{kind}: resync (already current)", results,
                        lambda t=t: write_all(t, first, args.batch), args.n)  # fmt: skip
            assert got == {"already_current": args.n}, got
            phase(f"{kind}: 1,000 moves by 200", results,
                  lambda t=t: write_all(t, moved, 200), len(moved))  # fmt: skip
            t.close()
            results[f"{kind}_bytes"] = url.stat().st_size
        dest = Destination("b", "parcels", "gpkg", str(work / "parcels.gpkg"), "parcels")
        t = open_target(dest, geo=True, rebuild="bench-manifest")
        phase("gpkg rebuild: copy (VACUUM INTO)", results, t.ensure, args.n)
        again = docs(args.n, "M-2")
        phase("gpkg rebuild: write at M-2", results,
              lambda: write_all(t, again, args.batch), args.n)  # fmt: skip
        phase("gpkg rebuild: finish (merge, swap)", results, t.finish, args.n)
        t.close()
        print(json.dumps({k: v for k, v in results.items() if k.endswith("bytes")}),
              file=sys.stderr)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save_results(Path(__file__).resolve().parent / "results", "gpkg", json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
