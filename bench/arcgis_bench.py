"""ArcGIS connector benchmark: a 100,000-feature layer on the fake FeatureServer (11.1
flavour, src/feedledger/demo/featureserver.py) in pages of 2,000; `feedledger run`
against the floor of merely downloading the same pages.

    .venv/bin/python bench/arcgis_bench.py [--n 100000] [--page 2000] [--repeat 3]
                                           [--vertices 10] [--prerendered]

The fake server runs in its own process (`--serve`, started by the benchmark), so its
work does not share this process's interpreter. Each feature is a polygon of
`--vertices` vertices (closed ring of vertices + 1 points) with three attributes. It
answers each query as a real server does, rendering the page when asked (sorting the
layer by object id, reprojecting to WGS84 for `outSR=4326`, `json.dumps`); with
`--prerendered` it answers the page bytes from a cache filled by one warm-up download,
so the floor is then little more than the transfer itself.

Measured, `--repeat` times each, in turn (the median is reported):

- floor: one httpx client GETs exactly the requests `fetch_layer` sends (layer
  metadata, returnCountOnly, the pages with `f=geojson`, `outSR=4326`,
  `orderByFields`, `resultOffset`/`resultRecordCount`, metadata again) and reads every
  body, nothing else (in a fresh child process, interpreter start and imports counted);
- fetch_layer: `sources.arcgis.fetch_layer` alone, in a fresh child process likewise;
- run: `feedledger run zoning --json` as a whole process in a fresh workspace (SQLite),
  the layer's first load: fetch, archive, geo reader, apply 100,000 versions
  (`FEEDLEDGER_TIMINGS=1`: its stage timings are kept with the results, and its wall
  time split at the `fetch` stage: before, fetch, after -- `phases`).

Wall seconds are what the target is about; each child's CPU seconds (user + sys) are
reported beside them, steadier on a shared machine.

Prints a Markdown table and writes bench/results/arcgis-latest.json (bench/resultfiles.py).
Target (issue 15): run <= 1.5 x floor.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
FEEDLEDGER = str(Path(PY).with_name("feedledger"))


def features(n: int, vertices: int) -> list[dict[str, Any]]:
    """`n` parcels, each a closed ring of `vertices` vertices (clockwise, as Esri)."""
    import math

    zones = ("R-1", "R-2", "C-1", "M-1", "AG")
    # a clockwise polygon around (0, 0), radius ~40 ft, with a little wobble
    unit = [
        (
            40.0 * (1 + 0.1 * (k % 3)) * math.cos(-2 * math.pi * k / vertices),
            40.0 * (1 + 0.1 * (k % 3)) * math.sin(-2 * math.pi * k / vertices),
        )
        for k in range(vertices)
    ]
    out = []
    for oid in range(1, n + 1):
        cx, cy = 6_000_000.0 + (oid % 300) * 100.0, 2_000_000.0 + (oid // 300) * 100.0
        ring = [[round(cx + dx, 3), round(cy + dy, 3)] for dx, dy in unit]
        ring.append(ring[0])
        attributes = {"OBJECTID": oid, "PARCEL_ID": f"P{oid:07d}", "ZONING": zones[oid % 5]}
        out.append({"attributes": attributes, "rings": [ring]})
    return out


def serve(n: int, page: int, vertices: int, prerendered: bool) -> None:
    """The fake server's process: prints its layer URL, serves until stdin closes."""
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's fake (feedledger/demo/)
    from feedledger.demo.featureserver import FakeArcGIS
    from feedledger.demo.local_server import Reply, Request, serve

    fake = FakeArcGIS(flavour="11.1", features=features(n, vertices), max_record_count=page)
    cache: dict[str, Reply] = {}

    def route(request: Request) -> Reply:
        if not prerendered or not request.path.endswith("/query"):
            return fake.route(request)
        key = json.dumps(sorted(request.query.items()))
        if key not in cache:
            cache[key] = fake.route(request)
        return cache[key]

    with serve(route) as server:
        fake.server = server
        print(fake.url, flush=True)
        for line in sys.stdin:  # "daily": the next day's layer; the end of input: stop
            if line.strip() == "daily":
                next_day(fake)
                cache.clear()
                print("ok", flush=True)


def next_day(fake: Any) -> None:
    """The layer a day later: its edit date one day on, 1 % of its features edited (every
    100th: half rezoned, half with one vertex moved ~1 m)."""
    fake.edit_date += 86_400_000
    for i, feature in enumerate(fake.features):
        if i % 100 == 7:
            if i % 200 == 7:
                feature["attributes"]["ZONING"] = f"MU-{fake.edit_date // 86_400_000}"
            else:
                ring = feature["rings"][0]
                ring[1] = [ring[1][0] + 3.0, ring[1][1]]


FLOOR = """
import sys, time, httpx
t0 = time.perf_counter()
url, n, page = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
total = 0
with httpx.Client(timeout=60) as c:
    def get(u, **q):
        global total
        with c.stream("GET", u, params=q) as r:
            for chunk in r.iter_bytes():
                total += len(chunk)
    get(url, f="json")
    get(url + "/query", where="1=1", returnCountOnly="true", f="json")
    for off in range(0, n, page):
        get(url + "/query", where="1=1", outFields="*", outSR="4326", f="geojson",
            orderByFields="OBJECTID", resultOffset=str(off), resultRecordCount=str(page))
    get(url, f="json")
print(total, time.perf_counter() - t0)
"""

FETCH = """
import sys, time
t0 = time.perf_counter()
from feedledger.sources.arcgis import fetch_layer
layer = fetch_layer(sys.argv[1], max_payload_bytes=2**34, fetch_deadline_s=3600)
print(len(layer.data), time.perf_counter() - t0)
"""


CPU: list[float] = []  # user + sys CPU seconds of the last child `timed` ran


def timed(argv: list[str], cwd: Path | None = None) -> tuple[float, str]:
    """Wall seconds and stdout of one child; its CPU seconds go to CPU[-1]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[:] = [after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime]
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall, proc.stdout


# The fake layer's edit dates are fixed (2026-05-28 on) while `run` compares them with
# today: with a daily cadence the days between would count as missed and the second run
# would be a catch-up (fetch, archive, backfill) instead of the live run measured here.
YEARLY = "0 0 1 1 *"


def workspace(url: str, work: Path) -> Path:
    """A fresh workspace (SQLite) with the layer as source `zoning`."""
    ws = Path(tempfile.mkdtemp(prefix="arcgis-run-", dir=work))
    timed([FEEDLEDGER, "init"], ws)
    cfg = ["--config", str(ws / "feedledger.toml")]
    timed([FEEDLEDGER, *cfg, "source", "add", "zoning", "--connector", "arcgis", "--fetch", url,
           "--key", "PARCEL_ID", "--max-payload-bytes", str(2**34),
           "--fetch-deadline", "3600", "--cadence", YEARLY])  # fmt: skip
    return ws


def run_once(ws: Path) -> tuple[float, dict[str, Any]]:
    """`feedledger run zoning --json` in `ws`: wall seconds and its JSON (+ timings)."""
    cfg = ["--config", str(ws / "feedledger.toml")]
    env = {**os.environ, "FEEDLEDGER_TIMINGS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([FEEDLEDGER, *cfg, "run", "zoning", "--json"], cwd=ws, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[:] = [after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime]
    if proc.returncode != 0:
        raise SystemExit(f"feedledger run failed ({proc.returncode}):\n{proc.stderr}")
    result = json.loads(proc.stdout)
    stages = [line for line in proc.stderr.splitlines() if line.startswith("timings:")]
    result["_timings"] = stages[-1] if stages else None
    return wall, result


def phases(wall: float, timings: str | None) -> dict[str, float] | None:
    """A run's wall time split at its `fetch` stage: before it (interpreter start,
    imports, the store opened, the frozen/waiting checks), the fetch (download, with
    the pages read meanwhile) and after it (the rest: archive, read, the transaction)."""
    if not timings:
        return None
    stages = dict(part.split("=", 1) for part in timings.split()[1:])
    if "fetch" not in stages:
        return None
    after = sum(float(v) for k, v in stages.items() if k in _AFTER_FETCH)
    fetch = float(stages["fetch"])
    return {"before_fetch_s": wall - fetch - after, "fetch_s": fetch, "after_fetch_s": after}


# the top-level stages of a run after its fetch (txn_* are inside `transaction`)
_AFTER_FETCH = frozenset(
    [
        "read",
        "archive_wait",
        "archive",
        "store_open",
        "register",
        "lease",
        "state_load",
        "diff",
        "attributes",
        "next_state",
        "transaction",
        "cache_publish",
        "release",
        "store_close",
    ]
)


def daily(
    server: subprocess.Popen[str], url: str, ws: Path, args: argparse.Namespace, details: Any
) -> None:
    """The next day: the server edits 1 % of the layer and moves its date; then the
    floor of downloading it and `run` in the workspace of the first load."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("daily\n")
    server.stdin.flush()
    if server.stdout.readline().strip() != "ok":
        raise SystemExit("the fake server did not move to the next day")
    floor_argv = [PY, "-c", FLOOR, url, str(args.n), str(args.page)]
    if args.prerendered:
        timed(floor_argv)  # fills the cache with the new day's pages
    wall, out = timed(floor_argv)
    details["daily_floor"].append({"wall_s": wall, "cpu_s": CPU[0], "stdout": out.strip()})
    run_wall, result = run_once(ws)
    expected = len(range(7, args.n, 100))
    if result.get("changes") != expected:
        raise SystemExit(f"daily run applied {result.get('changes')} changes, not {expected}")
    details["daily_run"].append(
        {
            "wall_s": run_wall,
            "cpu_s": CPU[0],
            "timings": result["_timings"],
            "phases": phases(run_wall, result["_timings"]),
        }
    )
    print(f"     daily: floor {wall:.2f} s, run {run_wall:.2f} s "
          f"({result['_timings']})", file=sys.stderr)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--page", type=int, default=2_000)
    parser.add_argument("--vertices", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prerendered", action="store_true")
    parser.add_argument(
        "--daily",
        action="store_true",
        help="after each first load: the next day's layer (1 %% of features edited, the "
        "edit date a day on), its floor and the second run in the same workspace",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--results-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / ".work")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.n, args.page, args.vertices, args.prerendered)
        return 0

    load_at_start = os.getloadavg()
    flags = ["--n", str(args.n), "--page", str(args.page), "--vertices", str(args.vertices)]
    server = subprocess.Popen(
        [PY, __file__, "--serve", *flags, *(["--prerendered"] if args.prerendered else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    args.work.mkdir(parents=True, exist_ok=True)
    floors: list[float] = []
    fetches: list[float] = []
    runs: list[float] = []
    details: dict[str, Any] = {"floor": [], "fetch_layer": [], "run": []}
    if args.daily:
        details.update(daily_floor=[], daily_run=[])
    try:
        print(f"fake layer {url}: {args.n:,} features, pages of {args.page:,}", file=sys.stderr)
        timed([PY, "-c", FLOOR, url, str(args.n), str(args.page)])  # warm-up (and cache)
        for i in range(args.repeat):
            wall, out = timed([PY, "-c", FLOOR, url, str(args.n), str(args.page)])
            floors.append(wall)
            details["floor"].append({"wall_s": wall, "cpu_s": CPU[0], "stdout": out.strip()})
            wall, out = timed([PY, "-c", FETCH, url])
            fetches.append(wall)
            details["fetch_layer"].append({"wall_s": wall, "cpu_s": CPU[0], "stdout": out.strip()})
            ws = workspace(url, args.work)
            wall, result = run_once(ws)
            if result.get("changes") != args.n:
                raise SystemExit(f"run applied {result.get('changes')} changes, not {args.n}")
            runs.append(wall)
            details["run"].append({"wall_s": wall, "cpu_s": CPU[0], "timings": result["_timings"],
                                   "phases": phases(wall, result["_timings"])})  # fmt: skip
            print(f"  #{i + 1}: floor {floors[-1]:.2f} s, fetch_layer {fetches[-1]:.2f} s, "
                  f"run {runs[-1]:.2f} s ({result['_timings']})", file=sys.stderr)  # fmt: skip
            if args.daily:
                daily(server, url, ws, args, details)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    floor, fetch, run = (statistics.median(x) for x in (floors, fetches, runs))
    if args.daily:
        pairs = [
            r["wall_s"] / f["wall_s"]
            for f, r in zip(details["daily_floor"], details["daily_run"], strict=True)
        ]
        daily_summary = {
            "daily_floor_median_s": statistics.median(d["wall_s"] for d in details["daily_floor"]),
            "daily_run_median_s": statistics.median(d["wall_s"] for d in details["daily_run"]),
            "daily_run_over_floor_paired": pairs,
            "daily_run_over_floor_median": statistics.median(pairs),
        }
        print(f"daily (1 % edited): {daily_summary}", file=sys.stderr)
    cpu = {k: statistics.median(d["cpu_s"] for d in v) for k, v in details.items()}
    summary = {
        "n": args.n,
        "page": args.page,
        "vertices": args.vertices,
        "prerendered": args.prerendered,
        "repeat": args.repeat,
        "floor_median_s": floor,
        "fetch_layer_median_s": fetch,
        "run_median_s": run,
        "fetch_layer_over_floor": fetch / floor,
        "run_over_floor": run / floor,
        "run_over_floor_paired": [r / f for f, r in zip(floors, runs, strict=True)],
        **(daily_summary if args.daily else {}),
        "target_run_over_floor": 1.5,
        "client_cpu_median_s": cpu,
        "load_average_start": load_at_start,
        "load_average_end": os.getloadavg(),
        "git_rev": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "details": details,
    }
    sys.path.insert(0, str(ROOT / "bench"))
    from resultfiles import save_results

    name = "arcgis-prerendered" if args.prerendered else "arcgis"
    name += "-daily" if args.daily else ""
    latest = save_results(args.results_dir, name, json.dumps(summary, indent=2) + "\n")
    print("| N | page | server | floor s | fetch_layer s | run s | fetch/floor | run/floor "
          "| client CPU s: floor / fetch_layer / run |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    how = "prerendered" if args.prerendered else "renders each page"
    print(f"| {args.n:,} | {args.page:,} | {how} | {floor:.2f} | {fetch:.2f} | {run:.2f} "
          f"| {fetch / floor:.2f} | {run / floor:.2f} "
          f"| {cpu['floor']:.2f} / {cpu['fetch_layer']:.2f} / {cpu['run']:.2f} |")  # fmt: skip
    print(f"results: {latest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
