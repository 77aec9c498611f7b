"""One big source (issue 30, target 3): first load and next day of gen_parcels.py's feed
at N parcels, whole processes, wall time and peak RSS, on SQLite and PostgreSQL, with and
without a `memory_budget`; then a snapshot (CSV to a file) and asof latency on the
loaded ledger.

    .venv/bin/python bench/big_source_bench.py --data /work/data/n10m [--data /work/data/n1m]
        [--backends sqlite,postgresql] [--budgets none,1GiB] [--postgres URL]
        [--asof 200] [--src SRC]

Each (data, backend, budget) is one fresh workspace: `ingest` of day 1, then day 2, each
under /usr/bin/time (wall, peak RSS, user + sys CPU) with FEEDLEDGER_TIMINGS=rss (the
stage where the peak was reached); then `snapshot --valid day 2 -o file` (wall, peak
RSS) and `asof` of random parcels through the Python API (p50/p90 ms, after a warm-up). `--src` runs
another source tree (PYTHONPATH) for an A/B. The data directories come from
`bench/gen_parcels.py --n N --days 2 --out DIR`. Figures differ by minutes on a shared
machine: compare configurations of one run, not runs. Writes
bench/results/big-source-latest.json.
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
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from resultfiles import save_results  # noqa: E402

PY = str(ROOT / ".venv" / "bin" / "python")


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src)}


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run `argv` under /usr/bin/time: wall s, peak RSS MiB, and the timings line."""
    out = cwd / ".time"
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M %U %S", "-o", str(out), *argv],
        cwd=cwd,
        env={**env, "FEEDLEDGER_TIMINGS": "rss"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    wall, rss, user, system = out.read_text().split()[-4:]
    stages = {}
    for line in done.stderr.splitlines():
        if line.startswith("timings:"):
            for item in line.split()[1:]:
                name, value = item.split("=")
                stages[name] = float(value)
    peaks = {k: v for k, v in stages.items() if k.endswith(".peak_mib")}
    # the first stage (in the order they ran) at which the peak was reached
    peak_stage = next((k for k, v in peaks.items() if v == max(peaks.values())), None)
    return {
        "wall_s": float(wall),
        "peak_mib": int(rss) // 1024,
        # the process's CPU (all threads; a PostgreSQL server's own is not counted): the
        # figure to compare on a loaded machine, where walls are not
        "cpu_s": round(float(user) + float(system), 2),
        "user_s": float(user),
        "sys_s": float(system),
        "peak_stage": peak_stage.removesuffix(".peak_mib") if peak_stage else None,
        "stages_s": {k: v for k, v in stages.items() if "." not in k and v >= 0.5},
    }


def _store_url(backend: str, work: Path, postgres: str) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{work / 'ledger.db'}", None
    import psycopg

    schema = f"big_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in postgres else "?"
    return f"{postgres}{sep}options=-csearch_path%3D{schema}", schema


def _asof(work: Path, src: Path, n: int, count: int) -> dict[str, float]:
    code = f"""
import json, random, sys, time
from datetime import date
import feedledger as fl
rnd = random.Random(7)
times = []
with fl.open({str(work)!r}) as led:
    s = led.source("parcels")
    for _ in range(50):
        s.asof(f"P{{rnd.randint(1, {n}):08d}}", valid=date(2026, 8, 2)).to_json()
    for _ in range({count}):
        t = time.perf_counter()
        s.asof(f"P{{rnd.randint(1, {n}):08d}}", valid=date(2026, 8, 2)).to_json()
        times.append((time.perf_counter() - t) * 1000)
times.sort()
print(json.dumps({{"p50_ms": times[len(times) // 2], "p90_ms": times[int(len(times) * 0.9)]}}))
"""
    done = subprocess.run(
        [PY, "-c", code], env=_env(src), capture_output=True, text=True, check=True
    )
    return {k: round(v, 3) for k, v in json.loads(done.stdout).items()}


def one(
    data: Path, backend: str, budget: str, src: Path, postgres: str, asof: int
) -> dict[str, Any]:
    n = sum(1 for _ in data.joinpath("parcels_2026-08-01.csv").open("rb")) - 1
    work = Path(tempfile.mkdtemp(prefix="big-source-", dir=os.environ.get("BIG_SOURCE_TMP")))
    env = _env(src)
    url, schema = _store_url(backend, work, postgres)
    result: dict[str, Any] = {"n": n, "backend": backend, "budget": budget}
    try:
        fl = [PY, "-m", "feedledger"]
        subprocess.run([*fl, "init", "--store", url], cwd=work, env=env, check=True,
                       capture_output=True)  # fmt: skip
        extra = [] if budget == "none" else ["--memory-budget", budget]
        subprocess.run(
            [*fl, "source", "add", "parcels", "--key", "parcel_id", *extra],
            cwd=work, env=env, check=True, capture_output=True,
        )  # fmt: skip
        for day, label in ((1, "first_load"), (2, "next_day")):
            path = data / f"parcels_2026-08-0{day}.csv"
            argv = [*fl, "ingest", "parcels", str(path), "--published-at", f"2026-08-0{day}"]
            result[label] = _timed(argv, work, env)
            print(backend, budget, n, label, result[label], flush=True)
        snap = [*fl, "snapshot", "parcels", "--valid", "2026-08-02", "-o", str(work / "s.csv")]
        result["snapshot"] = _timed(snap, work, env)
        if asof:
            result["asof"] = _asof(work, src, n, asof)
        print(backend, budget, n, "snapshot", result["snapshot"], result.get("asof"), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if schema is not None:
            import psycopg

            with psycopg.connect(postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", action="append", type=Path, required=True)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--budgets", default="none,1GiB")
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--asof", type=int, default=200)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    args = ap.parse_args()
    results = []
    started = time.time()
    for data in args.data:
        for backend in args.backends.split(","):
            for budget in args.budgets.split(","):
                results.append(one(data, backend, budget, args.src, args.postgres, args.asof))
    summary: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "elapsed_s": round(time.time() - started),
        "load_average": os.getloadavg(),
        "runs": results,
    }
    by_size = sorted({r["n"] for r in results})
    if len(by_size) == 2:
        small, big = by_size
        ratios = []
        for r in results:
            if r["n"] != big:
                continue
            base = next(
                (s for s in results if s["n"] == small and s["backend"] == r["backend"]
                 and s["budget"] == r["budget"]),
                None,
            )  # fmt: skip
            if base is None:
                continue
            scale = big / small
            ratios.append(
                {
                    "backend": r["backend"],
                    "budget": r["budget"],
                    **{
                        f"{k}_vs_{scale:.0f}x": round(
                            r[k]["wall_s"] / (scale * base[k]["wall_s"]), 3
                        )
                        for k in ("first_load", "next_day", "snapshot")
                    },
                    "asof_p50_ratio": round(r["asof"]["p50_ms"] / base["asof"]["p50_ms"], 3)
                    if "asof" in r and "asof" in base
                    else None,
                }
            )
        summary["ratios"] = ratios
    text = json.dumps(summary, indent=2, default=statistics.mean) + "\n"
    print(text)
    save_results(ROOT / "bench" / "results", "big-source", text)


if __name__ == "__main__":
    main()
