"""Peak memory of `feedledger run` on an ArcGIS layer served as ONE big page: 1,000
features in a ~50 MB f=geojson page (the fake FeatureServer of
src/feedledger/demo/featureserver.py, 11.1 flavour, on 127.0.0.1, in this process;
`feedledger run` in a child process whose peak RSS is read from
getrusage(RUSAGE_CHILDREN)).

    PYTHONPATH=src .venv/bin/python bench/portal_page_memory.py [--n 1000] [--vertices 1250]

Prints the page's size, the child's peak RSS and their ratio. Issue 28 B21: measured
592 MB for a 50 MB page (12x) against the README's "the payload's size once, plus what
parsing takes".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's fake FeatureServer (feedledger/demo/)


def features(n: int, vertices: int) -> list[dict[str, Any]]:
    out = []
    for oid in range(1, n + 1):
        cx, cy = 6_000_000.0 + (oid % 30) * 1000.0, 2_000_000.0 + (oid // 30) * 1000.0
        ring = [
            [
                cx + 400.0 * math.cos(-2 * math.pi * k / vertices) + 0.123456 * (k % 7),
                cy + 400.0 * math.sin(-2 * math.pi * k / vertices) + 0.654321 * (k % 5),
            ]
            for k in range(vertices)
        ]
        ring.append(ring[0])
        attributes = {"OBJECTID": oid, "PARCEL_ID": f"P{oid:07d}", "ZONING": "R-1"}
        out.append({"attributes": attributes, "rings": [ring]})
    return out


def serve(n: int, vertices: int) -> None:
    """The fake server's process: prints its layer URL, serves until stdin closes."""
    from feedledger.demo.featureserver import running

    with running("11.1") as fake:
        fake.features = features(n, vertices)
        fake.max_record_count = n  # one page holds the whole layer
        print(fake.url, flush=True)
        sys.stdin.read()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--vertices", type=int, default=1250)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.n, args.vertices)
        return
    # the server in its own process: a child forked from a big parent would count the
    # parent's pages in its peak RSS until it execs
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--n", str(args.n), "--vertices",
         str(args.vertices)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        query = (
            f"{url}/query?where=1%3D1&outFields=*&outSR=4326&f=geojson"
            f"&orderByFields=OBJECTID&resultOffset=0&resultRecordCount={args.n}"
        )
        with urllib.request.urlopen(query) as answer:
            page = len(answer.read())
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
            cmd = [sys.executable, "-m", "feedledger"]
            subprocess.run([*cmd, "init"], cwd=tmp, env=env, check=True, capture_output=True)
            subprocess.run(
                [*cmd, "source", "add", "zoning", "--connector", "arcgis", "--fetch", url,
                 "--key", "PARCEL_ID"],
                cwd=tmp, env=env, check=True, capture_output=True,
            )  # fmt: skip
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            done = subprocess.run(
                [*cmd, "run", "zoning", "--json"], cwd=tmp, env=env, capture_output=True,
                text=True,
            )  # fmt: skip
            peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            if done.returncode != 0:
                sys.exit(f"run failed: {done.stderr}")
            changes = json.loads(done.stdout)["changes"]
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait()
    peak = peak_kib * 1024
    print(
        f"page {page / 1e6:.1f} MB ({args.n} features x {args.vertices} vertices); "
        f"run applied {changes}; peak RSS {peak / 1e6:.0f} MB = {peak / page:.1f}x the page"
        f" (init and source add peaked at {before / 1024:.0f} MB)"
    )


if __name__ == "__main__":
    main()
