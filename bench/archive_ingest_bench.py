"""Does the compressed archive slow the ingest? (issue 17 target 5)

Whole ``feedledger`` processes in fresh workspaces that differ only in the archive:
``compressed`` (``[archive] full_frame_every = 30``, the default: a keyframe on the first
load, then each day a delta against the day before) and ``raw`` (``full_frame_every =
0``: raw objects, as before issue 17); with ``--before SRC``, a third arm ``before`` runs
the same compressed workspace with the package imported from another tree's ``src``
(e.g. a ``git worktree`` of the commit before a change)::

    feedledger init; feedledger source add parcels --key parcel_id --format csv
    feedledger ingest parcels day1 --published-at D1          # first load, timed
    feedledger ingest parcels day2 --published-at D2          # daily ingest, timed
    ...

    python bench/archive_ingest_bench.py --n 1000000 --daily 2 --pairs 3
    python bench/archive_ingest_bench.py --before /tmp/prev/src

Every round runs every arm once, the order rotated by one between rounds. Each step: wall
time, CPU seconds (user + sys, from ``os.wait4``) and peak RSS, with the load average
at the time. Results: Markdown on stdout, JSON in
``bench/results/archive-ingest-<n>-latest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_bench import (
    BENCH_DIR,
    GEN_SCRIPT,
    RESULTS_DIR,
    RUNS_DIR,
    log,
    machine_info,
    parse_json_output,
    run_measured,
)
from resultfiles import save_results

SOURCE = "parcels"


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def generate(n: int, days: int, out: Path | None, timeout: float) -> list[dict[str, Any]]:
    argv = [sys.executable, GEN_SCRIPT, "--n", n, "--days", days, "--json"]
    if out is not None:
        argv += ["--out", out.resolve()]  # the child runs in bench/
    found: list[dict[str, Any]] = parse_json_output(run_measured(argv, BENCH_DIR, timeout).stdout)[
        "days"
    ][:days]
    return found


def command(src: Path | None) -> list[str]:
    """The feedledger command: this venv's, or its Python importing `src` first."""
    if src is None:
        return [str(Path(sys.executable).parent / "feedledger")]
    boot = (
        f"import sys; sys.path.insert(0, {str(src)!r}); "
        "from feedledger.cli.main import main; sys.argv[0] = 'feedledger'; sys.exit(main())"
    )
    return [sys.executable, "-c", boot]


def one_arm(
    arm: str, every: int, exe: list[str], days: list[dict[str, Any]], timeout: float
) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix=f"archive-ingest-{arm}-", dir=RUNS_DIR))
    steps: list[dict[str, Any]] = []
    try:
        run_measured([*exe, "init"], root, timeout)
        config = root / "feedledger.toml"
        text = config.read_text().replace("[archive]\n", f"[archive]\nfull_frame_every = {every}\n")
        config.write_text(text)
        run_measured([*exe, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv"],
                     root, timeout)  # fmt: skip
        for i, day in enumerate(days):
            argv = [*exe, "ingest", SOURCE, day["path"], "--published-at", day["published_at"]]
            proc = run_measured([*argv, "--json"], root, timeout)
            report = parse_json_output(proc.stdout)
            step = {
                "step": "first_load" if i == 0 else "daily",
                "day": i + 1,
                "wall_s": round(proc.wall_s, 3),
                "cpu_s": round(proc.user_s + proc.sys_s, 3),
                "maxrss_mib": proc.maxrss_kib // 1024,
                "load": load_avg(),
                "status": report.get("status"),
            }
            steps.append(step)
            log(f"  {arm} day {i + 1}: {step['wall_s']} s wall, {step['cpu_s']} s CPU, "
                f"{step['maxrss_mib']} MiB ({step['load']})")  # fmt: skip
        objects = root / ".feedledger" / "archive" / "objects"
        size = sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())
        steps.append({"step": "archive_bytes", "bytes": size})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return steps


def summary(runs: dict[str, list[list[dict[str, Any]]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm, rounds in runs.items():
        first = [s for r in rounds for s in r if s["step"] == "first_load"]
        daily = [s for r in rounds for s in r if s["step"] == "daily"]
        out[arm] = {
            "first_load_wall_s": [s["wall_s"] for s in first],
            "first_load_cpu_s": [s["cpu_s"] for s in first],
            "daily_wall_s": [s["wall_s"] for s in daily],
            "daily_cpu_s": [s["cpu_s"] for s in daily],
            "peak_rss_mib": max(s["maxrss_mib"] for s in first + daily),
            "archive_bytes": rounds[0][-1]["bytes"],
        }
        for key in ("first_load_wall_s", "first_load_cpu_s", "daily_wall_s", "daily_cpu_s"):
            out[arm][f"{key}_median"] = round(statistics.median(out[arm][key]), 3)
    if "raw" in out:
        for arm in out:
            if arm != "raw":
                for key in ("first_load_wall_s", "first_load_cpu_s", "daily_wall_s", "daily_cpu_s"):
                    ratio = out[arm][f"{key}_median"] / out["raw"][f"{key}_median"]
                    out[arm][f"{key}_vs_raw"] = round(ratio, 3)
    return out


def _cell(r: dict[str, Any], key: str) -> str:
    vs = r.get(f"{key}_vs_raw")
    extra = f" **{vs}x raw**" if vs is not None else ""
    return f"{', '.join(str(x) for x in r[key])} (median {r[f'{key}_median']}){extra}"


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| arm | first load wall s | CPU s | daily wall s | CPU s | peak RSS | archive |",
        "|---|---|---|---|---|---:|---:|",
    ]
    for arm, r in result["summary"].items():
        cells = " | ".join(
            _cell(r, key)
            for key in ("first_load_wall_s", "first_load_cpu_s", "daily_wall_s", "daily_cpu_s")
        )
        rows.append(
            f"| {arm} | {cells} | {r['peak_rss_mib']} MiB | {r['archive_bytes'] / 1e6:,.1f} MB |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="parcels a day (%(default)s)")
    p.add_argument("--daily", type=int, default=2, help="daily ingests after the first load")
    p.add_argument("--pairs", type=int, default=3, help="rounds (%(default)s)")
    p.add_argument("--before", type=Path, help="another tree's src/: a third arm")
    p.add_argument("--data", type=Path, help="gen_parcels.py --out (default: its cache)")
    p.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args(argv)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    log(f"archive_ingest_bench: n={args.n} daily={args.daily} (load {load_avg()})")
    days = generate(args.n, args.daily + 1, args.data, args.timeout)
    arms: dict[str, tuple[int, list[str]]] = {
        "compressed": (30, command(None)),
        "raw": (0, command(None)),
    }
    if args.before is not None:
        arms["before"] = (30, command(args.before.resolve()))
    runs: dict[str, list[list[dict[str, Any]]]] = {arm: [] for arm in arms}
    names = list(arms)
    for r in range(args.pairs):
        for arm in names[r % len(names) :] + names[: r % len(names)]:
            every, exe = arms[arm]
            runs[arm].append(one_arm(arm, every, exe, days, args.timeout))
    result = {
        "n": args.n,
        "daily": args.daily,
        "pairs": args.pairs,
        "before": str(args.before) if args.before else None,
        "machine": machine_info(),
        "load_after": load_avg(),
        "runs": runs,
        "summary": summary(runs),
    }
    latest = save_results(
        RESULTS_DIR, f"archive-ingest-{args.n}", json.dumps(result, indent=2) + "\n"
    )
    print(markdown(result))
    log(f"results: {latest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
