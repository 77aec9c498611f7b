"""GIS benchmark: a county's parcel polygons in a GeoPackage, read and ingested.

    python bench/gis_bench.py [--n 1000000] [--repeat 3] [--skip-ingest]
    python bench/gis_bench.py gen N          # write the two days' files (cached)
    python bench/gis_bench.py floor FILE     # the floor, as one process
    python bench/gis_bench.py reader FILE    # read_observations alone, as one process

The data (`gen`): N parcel polygons of 10 distinct vertices each (11 with the closing
one), longitude/latitude at 6 decimals in EPSG:4326, with 9 typed properties
(`parcel_id` the key, owner, address, zoning, acres float, assessed_value int64,
year_built int32 mostly set, last_sale_date date, flood_zone). Day 2 changes 1 % of
the parcels: half only an attribute (assessed_value), a quarter only the geometry (one
vertex moved 1e-5 degrees, ~1 m), a quarter both; another 0.5 % have their rings
rotated and reversed (the same shape: not a change). Generated once into
`bench/.work/gis/` (deterministic: seeded).

The floor: no reader can be faster than reading the file with pyogrio (`read_arrow`)
and computing the canonical geometry hash of every feature
(`feedledger.formats.spatial.geometry.hash_wkb`, the reader's own: chunks on two threads, and
the validity the canonical form needs), so `floor` does exactly that.
`reader` runs `feedledger.formats.readers.read_observations` on the same bytes. The
end-to-end part runs `feedledger init`, `source add parcels --key parcel_id --format
gpkg`, `ingest` of day 1 (first load) and of day 2 (daily), in a fresh SQLite
workspace. Each is timed as a whole process (start-up and imports included); the
ratios to the floor's median are printed (and written to
`bench/results/gis-latest.json`). Targets: first load <= 4x, daily <= 2x.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / ".work" / "gis"
SEED = 20261130
VERTICES = 10


def _paths(n: int) -> tuple[Path, Path]:
    return DATA_DIR / f"parcels-{n}-day1.gpkg", DATA_DIR / f"parcels-{n}-day2.gpkg"


# -- data ------------------------------------------------------------------------------------


def generate(n: int) -> tuple[Path, Path]:
    """Day 1 and day 2 GeoPackages of `n` parcels (written once, then reused)."""
    import numpy as np
    import pyarrow as pa
    import shapely

    day1, day2 = _paths(n)
    if day1.exists() and day2.exists():
        return day1, day2
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    side = int(np.ceil(np.sqrt(n)))
    i = np.arange(n)
    cx = -105.2 + (i % side) * 0.0005
    cy = 40.3 + (i // side) * 0.0005
    angles = np.sort(rng.uniform(0, 2 * np.pi, (n, VERTICES)), axis=1)
    radius = rng.uniform(0.00012, 0.0002, (n, VERTICES))
    x = np.round(cx[:, None] + radius * np.cos(angles), 6)
    y = np.round(cy[:, None] + radius * np.sin(angles), 6)
    coords = np.stack([x, y], axis=2)

    def polygons(c: Any) -> Any:
        closed = np.concatenate([c, c[:, :1]], axis=1)
        return shapely.polygons(closed)

    zoning = np.array(["R-1", "R-2", "MU-2", "MU-3", "C-1", "I-1"])
    flood = np.array(["X", "AE", "A", "X500"])
    streets = np.array(["MAIN ST", "OAK AVE", "COUNTY RD 9", "ELM ST", "PINE DR"])
    value = rng.integers(50_000, 2_000_000, n)
    year = rng.integers(1900, 2025, n).astype(np.int32)
    rng_acres = rng.uniform(0.05, 40, n)
    sale = np.datetime64("1990-01-01") + rng.integers(0, 12_000, n).astype("timedelta64[D]")

    def table(geoms: Any, values: Any) -> pa.Table:
        year_built = pa.array(year, mask=(i % 9 == 0))
        return pa.table(
            {
                "parcel_id": pa.array([f"P{k:08d}" for k in range(n)]),
                "owner": pa.array([f"OWNER {k % 50_000}, J" for k in range(n)]),
                "address": pa.array([f"{100 + k % 9000} {streets[k % 5]}" for k in range(n)]),
                "zoning": pa.array(zoning[i % 6]),
                "acres": pa.array(np.round(rng_acres, 3)),
                "assessed_value": pa.array(values, pa.int64()),
                "year_built": year_built,
                "last_sale_date": pa.array(sale),
                "flood_zone": pa.array(flood[i % 4]),
                "geometry": pa.array(shapely.to_wkb(geoms), pa.binary()),
            }
        )

    _write(day1, table(polygons(coords), value))

    # day 2: 1 % changed (1/2 attribute, 1/4 geometry, 1/4 both), 0.5 % re-encoded
    picked = rng.permutation(n)
    changed = picked[: n // 100]
    attr = changed[: len(changed) // 2]
    geom = changed[len(changed) // 2 : 3 * len(changed) // 4]
    both = changed[3 * len(changed) // 4 :]
    rotated = picked[n // 100 : n // 100 + n // 200]
    value2 = value.copy()
    value2[np.concatenate([attr, both])] += 1000
    coords2 = coords.copy()
    moved = np.concatenate([geom, both])
    coords2[moved, 0, 0] = np.round(coords2[moved, 0, 0] + 0.00001, 6)
    coords2[rotated] = np.roll(coords2[rotated], 3, axis=1)[:, ::-1]
    _write(day2, table(polygons(coords2), value2))
    return day1, day2


def _write(path: Path, table: Any) -> None:
    import pyogrio

    tmp = path.with_suffix(".tmp.gpkg")
    tmp.unlink(missing_ok=True)
    pyogrio.write_arrow(
        table,
        tmp,
        driver="GPKG",
        layer="parcels",
        geometry_name="geometry",
        geometry_type="Polygon",
        crs="EPSG:4326",
    )
    tmp.rename(path)


# -- the measured processes --------------------------------------------------------------------


def floor(path: str) -> dict[str, Any]:
    import pyogrio

    from feedledger.formats.spatial.geometry import hash_wkb

    t0 = time.perf_counter()
    _meta, table = pyogrio.read_arrow(path)
    t1 = time.perf_counter()
    hashes, _invalid = hash_wkb(table.column(table.num_columns - 1))
    t2 = time.perf_counter()
    return {"rows": len(hashes), "read_s": t1 - t0, "hash_s": t2 - t1, "total_s": t2 - T_START}


def reader(path: str) -> dict[str, Any]:
    from feedledger import config
    from feedledger.formats.readers import read_observations

    src = config.make_source("parcels", key=("parcel_id",), format="gpkg")
    t0 = time.perf_counter()
    data = Path(path).read_bytes()
    obs = read_observations(data, src, label=Path(path).name)
    t1 = time.perf_counter()
    return {"rows": obs.height, "read_s": t1 - t0, "total_s": t1 - T_START}


def _timed(argv: list[str], cwd: Path | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"gis_bench: {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _median(argv: list[str], repeat: int) -> float:
    return statistics.median(_timed(argv)[0] for _ in range(repeat))


def _ingest(day1: Path, day2: Path, repeat: int) -> list[dict[str, Any]]:
    exe = str(Path(sys.executable).with_name("feedledger"))
    runs = []
    for _ in range(repeat):
        ws = Path(tempfile.mkdtemp(prefix="gis-bench-", dir=BENCH_DIR / ".work"))
        try:
            _timed([exe, "init"], ws)
            _timed([exe, "source", "add", "parcels", "--key", "parcel_id", "--format", "gpkg"], ws)
            first, _out1 = _timed(
                [exe, "ingest", "parcels", str(day1), "--published-at", "2026-11-01", "--json"], ws
            )
            daily, out2 = _timed(
                [exe, "ingest", "parcels", str(day2), "--published-at", "2026-11-02", "--json"], ws
            )
            runs.append({"first_s": first, "daily_s": daily, "daily_out": out2.strip()[-600:]})
        finally:
            shutil.rmtree(ws, ignore_errors=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["floor"], ["reader"]):
        step = floor if args[0] == "floor" else reader
        print(json.dumps(step(args[1])))
        return 0
    if args[:1] == ["gen"]:
        print(json.dumps([str(p) for p in generate(int(args[1]))]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-ingest", action="store_true")
    cfg = p.parse_args(args)
    day1, day2 = generate(cfg.n)
    me = [sys.executable, str(Path(__file__).resolve())]
    result: dict[str, Any] = {"n": cfg.n, "cpus": os.cpu_count()}
    result["floor_s"] = _median([*me, "floor", str(day1)], cfg.repeat)
    result["reader_s"] = _median([*me, "reader", str(day1)], cfg.repeat)
    result["reader_ratio"] = result["reader_s"] / result["floor_s"]
    if not cfg.skip_ingest:
        runs = _ingest(day1, day2, cfg.repeat)
        result["first_load_s"] = statistics.median(r["first_s"] for r in runs)
        result["daily_s"] = statistics.median(r["daily_s"] for r in runs)
        result["first_load_ratio"] = result["first_load_s"] / result["floor_s"]
        result["daily_ratio"] = result["daily_s"] / result["floor_s"]
        result["daily_output"] = runs[-1]["daily_out"]
    result["load_average"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    sys.path.insert(0, str(BENCH_DIR))
    from resultfiles import save_results

    save_results(BENCH_DIR / "results", "gis", text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
