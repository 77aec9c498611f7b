"""Dashboard benchmark (issue 16): the board with `--sources` sources rendered in a real
Chromium (Debian's, through Playwright) over `feedledger serve`.

    .venv/bin/python bench/dashboard_bench.py [--sources 200] [--repeat 7]

A workspace of `--sources` daily sources, each with two ingested payloads of 40 rows
(and one source stale by a week), is built once under bench/.work/dashboard-<n> and
reused; `feedledger serve --port 0` runs it in its own process. Measured, after one
warm-up load: the time from navigation to the board's table rendered (body
data-ready, all rows present) over `--repeat` loads (median and max), and
`GET /api/health` alone (the board's one request) with httpx. Target (issue 16): the
board with 200 sources renders in <= 1 s. Prints a table and writes
bench/results/dashboard-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from resultfiles import save_results  # noqa: E402


def build(root: Path, n: int) -> Path:
    import feedledger as fl

    config = root / "feedledger.toml"
    if (root / ".built").exists():
        return config
    if root.exists():
        import shutil

        shutil.rmtree(root)
    today = date.today()
    with fl.init(root) as led:
        for i in range(n):
            name = f"county{i:03d}"
            led.add_source(name, key=["id"], timezone="UTC", cadence="daily")
            src = led.source(name)
            last = today - timedelta(days=8 if i == 0 else 1)
            for k, day in enumerate((last - timedelta(days=1), last)):
                rows = "".join(f"{r},{'v' if r or not k else 'w'}{r}\n" for r in range(40))
                src.ingest(f"id,v\n{rows}".encode(), published_at=day)
    (root / ".built").write_text("ok\n")
    return config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sources", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    import httpx
    from playwright.sync_api import sync_playwright

    from browser_support import chromium, serve

    binary = chromium()
    if binary is None:
        sys.exit("no Chromium: apt-get install -y --no-install-recommends chromium")
    t0 = time.perf_counter()
    config = build(HERE / ".work" / f"dashboard-{args.sources}", args.sources)
    built_s = time.perf_counter() - t0
    load_start = os.getloadavg()
    with serve(config, None, {}) as server:
        health_ms = []
        with httpx.Client(base_url=server.url, timeout=60) as client:
            client.get("/api/health")
            for _ in range(args.repeat):
                t = time.perf_counter()
                assert client.get("/api/health").status_code == 200
                health_ms.append((time.perf_counter() - t) * 1000)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=binary)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            board_ms = []
            for i in range(args.repeat + 1):
                t = time.perf_counter()
                page.goto(server.url + "/")
                page.wait_for_selector("body[data-ready=true]", timeout=60_000)
                elapsed = (time.perf_counter() - t) * 1000
                rows = page.locator("#board tbody tr").count()
                assert rows == args.sources, rows
                if i:  # the first load warms the server and the browser's cache
                    board_ms.append(elapsed)
            first = page.locator("#board tbody tr td:first-child").first.inner_text()
            browser.close()
    assert not errors, errors
    assert first == "county000", first  # the stale source first
    result = {
        "bench": "dashboard",
        "sources": args.sources,
        "repeat": args.repeat,
        "board_ms": {"median": statistics.median(board_ms), "max": max(board_ms)},
        "health_ms": {"median": statistics.median(health_ms), "max": max(health_ms)},
        "target_board_ms": 1000,
        "build_s": round(built_s, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_start": load_start,
            "load_end": os.getloadavg(),
        },
        "git_rev": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
        ).stdout.strip(),
    }
    print(f"| board, {args.sources} sources | median {result['board_ms']['median']:.0f} ms "
          f"| max {result['board_ms']['max']:.0f} ms | target <= 1000 ms |")  # fmt: skip
    print(f"| GET /api/health | median {result['health_ms']['median']:.0f} ms "
          f"| max {result['health_ms']['max']:.0f} ms | |")  # fmt: skip
    print("load average at start / end:", load_start, os.getloadavg())
    latest = save_results(HERE / "results", "dashboard", json.dumps(result, indent=2) + "\n")
    print("results:", latest)


if __name__ == "__main__":
    main()
