"""OGC API - Features items pages on 1M parcels: `feedledger serve`'s
`/ogc/collections/parcels/items?limit=100` timed over HTTP.

    python bench/ogc_items_bench.py [--n 1000000] [--requests 300] [--store-url URL]

The data is `gis_bench.py`'s (the GIS variant of the parcel generator: N parcel
polygons of 10 vertices in EPSG:4326 with 9 typed properties, day 2 editing 1 %),
ingested once into a workspace under `bench/.work/ogc-<n>-<backend>` (reused when
there; `--store-url` a PostgreSQL URL for that backend). Then `feedledger serve`
starts on a free port and, one keep-alive client at a time:

* `first`: the first items request, which builds the layer's spatial index (one scan of
  the state: keys, valid_from, geometry envelopes) -- wall time, the server's CPU and
  its RSS after;
* `offset`: pages of 100 at random offsets over the whole layer;
* `bbox`: pages of (at most) 100 for a random ~0.005 degree box inside the layer
  (about 100 parcels each), with numberMatched;
* `bbox_datetime`: the same with `datetime=2026-11-01` (the day-1 state: its own index,
  built once by the first of them, that first request reported apart).

Each is reported as p50/p90/p99 of the wall time per request and the server's CPU per
request (user+sys over the run / requests: the machine is shared, wall times are not
to be trusted alone). Results go to `bench/results/ogc-items-latest.json` (and a
stamped copy git ignores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import gis_bench  # noqa: E402
from resultfiles import save_results  # noqa: E402

EXE = str(Path(sys.executable).with_name("feedledger"))
X0, Y0, STEP = -105.2, 40.3, 0.0005  # gis_bench's grid


def workspace(n: int, store_url: str | None) -> Path:
    backend = "pg" if store_url else "sqlite"
    ws = BENCH / ".work" / f"ogc-{n}-{backend}"
    if (ws / "ready").exists():
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    day1, day2 = gis_bench.generate(n)
    init = [EXE, "init"] + (["--store-url", store_url] if store_url else [])
    for argv in (
        init,
        [EXE, "source", "add", "parcels", "--key", "parcel_id", "--format", "gpkg"],
        [EXE, "ingest", "parcels", str(day1), "--published-at", "2026-11-01"],
        [EXE, "ingest", "parcels", str(day2), "--published-at", "2026-11-02"],
    ):
        subprocess.run(argv, cwd=ws, check=True, stdout=subprocess.DEVNULL)
    (ws / "ready").write_text("")
    return ws


def serve(ws: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [EXE, "serve", "--port", "0"],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if found:
            url = found.group(1)
            while True:
                try:
                    httpx.get(url + "/ogc", timeout=10)
                    return proc, url
                except httpx.TransportError:
                    time.sleep(0.05)
    proc.kill()
    raise SystemExit("serve did not start")


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def timed(client: httpx.Client, server: psutil.Process, urls: list[str]) -> dict[str, Any]:
    walls = []
    matched = []
    before = cpu(server)
    for url in urls:
        t = time.perf_counter()
        r = client.get(url)
        walls.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text[:300]
        body = r.json()
        assert body["numberReturned"] <= 100
        matched.append(body["numberMatched"])
    spent = cpu(server) - before
    walls.sort()
    return {
        "requests": len(urls),
        "p50_ms": round(1000 * walls[len(walls) // 2], 2),
        "p90_ms": round(1000 * walls[int(len(walls) * 0.9)], 2),
        "p99_ms": round(1000 * walls[int(len(walls) * 0.99)], 2),
        "server_cpu_ms_per_request": round(1000 * spent / len(urls), 2),
        "median_matched": statistics.median(matched),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--store-url", default=None)
    cfg = p.parse_args(argv)
    ws = workspace(cfg.n, cfg.store_url)
    proc, url = serve(ws)
    server = psutil.Process(proc.pid)
    rng = random.Random(20261206)
    side = int(cfg.n**0.5)
    items = url + "/ogc/collections/parcels/items"

    def boxes(k: int) -> list[str]:
        out = []
        for _ in range(k):
            x = X0 + rng.uniform(0, (side - 10) * STEP)
            y = Y0 + rng.uniform(0, (side - 10) * STEP)
            out.append(f"{x:.6f},{y:.6f},{x + 0.005:.6f},{y + 0.005:.6f}")
        return out

    results: dict[str, Any] = {"n": cfg.n, "backend": "pg" if cfg.store_url else "sqlite"}
    try:
        with httpx.Client(timeout=600) as client:
            results["server_rss_mib_before"] = round(server.memory_info().rss / 2**20)
            before, t = cpu(server), time.perf_counter()
            first = client.get(items + "?limit=100")
            assert first.status_code == 200
            results["first"] = {
                "wall_s": round(time.perf_counter() - t, 2),
                "server_cpu_s": round(cpu(server) - before, 2),
                "server_rss_mib": round(server.memory_info().rss / 2**20),
            }
            offsets = [rng.randrange(0, cfg.n - 100) for _ in range(cfg.requests)]
            results["offset"] = timed(
                client, server, [f"{items}?limit=100&offset={o}" for o in offsets]
            )
            results["bbox"] = timed(
                client, server, [f"{items}?limit=100&bbox={b}" for b in boxes(cfg.requests)]
            )
            dated = [f"{items}?limit=100&datetime=2026-11-01&bbox={b}" for b in boxes(cfg.requests)]
            before, t = cpu(server), time.perf_counter()
            client.get(dated[0])
            results["bbox_datetime_first"] = {
                "wall_s": round(time.perf_counter() - t, 2),
                "server_cpu_s": round(cpu(server) - before, 2),
                "server_rss_mib": round(server.memory_info().rss / 2**20),
            }
            results["bbox_datetime"] = timed(client, server, dated[1:])
            results["server_rss_mib_after"] = round(server.memory_info().rss / 2**20)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    results["load_average"] = [round(x, 1) for x in os.getloadavg()]
    save_results(BENCH / "results", "ogc-items", json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
