"""feedledger vs dlt ``scd2`` vs dbt ``snapshot`` on the same parcel feed, as whole processes.

    .venv/bin/python bench/peers/run.py                 # = make bench-peers
    .venv/bin/python bench/peers/run.py --smoke         # N=1,000, D=3, 1 round (+ cross-check)
    .venv/bin/python bench/peers/run.py --sizes 100000 --days 5 --rounds 3

Run with OUR venv's Python; the peers run under ``bench/.peers`` (``make bench-peers``
creates it). For every N the generated series (``gen_parcels.py``, cached) is fed, day by
day, to every tool in its own fresh workspace -- feedledger on SQLite, feedledger on
PostgreSQL, dlt, dbt -- and to the floor (``floor.py``: read + hash the same file). Within
a round the tools alternate day by day (A B C D E, A B C D E, ...) and the order rotates
by one between rounds, so drift of the shared machine spreads over all of them.
Each step is one child process: wall time and peak RSS (``os.wait4``).

After round 1 of each N, the three histories are read back and compared per entity (with
the truth computed from the files). Then a dedicated cross-check (``--crosscheck``, all
tools over 7 days) and the outage comparison (``--outage``: days 4-6 not run, caught up
on day 7) run. Results: a Markdown report on stdout, JSON in
``bench/results/peers-latest.json`` (bench/resultfiles.py). See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/: resultfiles

import peerslib as lib

from resultfiles import save_results

ib = lib.ib
GIB = 1024**3
MIB = 1024**2
SIZES = [100_000, 1_000_000]
TOOL_ORDER = [
    "feedledger-sqlite",
    "feedledger-postgresql",
    "feedledger-base-sqlite",
    "feedledger-base-postgresql",
    "dlt",
    "dbt",
    "floor",
]
PEERS = ("dlt", "dbt")
REFERENCE = "feedledger-sqlite"
TARGET_N = 1_000_000
# feedledger (SQLite) against the peers at N = 1,000,000
TARGETS = {
    "daily_vs_dlt": 0.25,  # feedledger daily median <= 0.25 x dlt's (issue 30)
    "daily_vs_dbt": 0.5,  # ... and <= 0.5 x dbt's
    "first_load_vs_dlt": 0.6,  # first load <= 0.6 x dlt's (issue 30)
    "postgresql_first_load_vs_dlt": 1.0,  # feedledger on PostgreSQL: first load <= dlt's
    "peak_rss_vs_lower_peer": 1.0,  # peak RSS <= the lower of dlt's and dbt's
}


def log(msg: str) -> None:
    lib.log(msg)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def stats(values: list[float]) -> dict[str, float] | None:
    return ib.stats(values)


# --- one N --------------------------------------------------------------------------------


def make_tools(
    names: list[str], pg: ib.Postgres | None, timeout: float, base_src: Path | None = None
) -> dict[str, lib.Tool]:
    tools: dict[str, lib.Tool] = {}
    for name in names:
        if name == "feedledger-sqlite":
            tools[name] = lib.Feedledger(name, timeout, backend="sqlite")
        elif name == "feedledger-postgresql":
            tools[name] = lib.Feedledger(name, timeout, backend="postgresql", pg=pg)
        elif name.startswith("feedledger-base-"):
            backend = name.removeprefix("feedledger-base-")
            # its own scratch database: the tools alternate day by day
            base_pg = ib.Postgres(pg.admin_url, "_base") if pg and backend == "postgresql" else None
            tools[name] = lib.Feedledger(
                name, timeout, backend=backend, pg=base_pg, base_src=base_src
            )
        elif name == "dlt":
            tools[name] = lib.Dlt(name, timeout)
        elif name == "dbt":
            tools[name] = lib.Dbt(name, timeout)
        elif name == "floor":
            tools[name] = lib.Floor(name, timeout)
    return tools


def run_size(
    args: argparse.Namespace, n: int, names: list[str], pg: ib.Postgres | None
) -> dict[str, Any]:
    files = lib.series(n, args.days, args.seed, args.timeout)
    log(f"== N = {n:,}: {len(files)} day(s) in {lib.series_dir(files)}; tools {', '.join(names)}")
    runs: list[dict[str, Any]] = []
    loadavgs: list[dict[str, Any]] = []
    crosscheck: dict[str, Any] | None = None
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        ws = Path(tempfile.mkdtemp(prefix=f"peers-n{n}-r{r}-", dir=args.runs_dir))
        tools = make_tools(order, pg, args.timeout, args.base_src)
        la = loadavg()
        log(f"-- round {r + 1}/{args.rounds} (order {', '.join(order)}), load average {la}")
        try:
            for tool in tools.values():
                tool.setup(ws / tool.name)
            for f in files:
                for name, tool in tools.items():
                    proc, out = tool.day(f)
                    runs.append(
                        {
                            "round": r,
                            "tool": name,
                            "day": f.day,
                            **proc.summary(),
                            "output": {k: v for k, v in out.items() if not isinstance(v, dict)},
                        }
                    )
                    log(
                        f"   {name:22s} day {f.day:2d}: {proc.wall_s:7.2f}s "
                        f"{proc.maxrss_kib / 1024:7.0f} MiB"
                    )
            if r == 0 and not args.no_crosscheck:
                crosscheck = round_crosscheck(args, files, tools)
        except BaseException:
            log(f"  (workspace kept for inspection: {ws})")
            raise
        loadavgs.append(
            {"round": r, "tool": "_loadavg", "loadavg_start": la, "loadavg_end": loadavg()}
        )
        if not args.keep:
            shutil.rmtree(ws, ignore_errors=True)
    summary = summarize(names, runs)
    return {
        "n": n,
        "days": args.days,
        "rounds": args.rounds,
        "series": str(lib.series_dir(files)),
        "loadavg": loadavgs,
        "runs": runs,
        "summary": summary,
        "targets": check_targets(summary) if n == TARGET_N else None,
        "crosscheck": crosscheck,
    }


def round_crosscheck(
    args: argparse.Namespace, files: list[lib.DayFile], tools: dict[str, lib.Tool]
) -> dict[str, Any]:
    fl = tools.get("feedledger-sqlite")
    dlt = tools.get("dlt")
    dbt = tools.get("dbt")
    result = lib.histories(
        "compare",
        "--series",
        lib.series_dir(files),
        "--days",
        ",".join(str(f.day) for f in files),
        *lib.store_args(
            fl if isinstance(fl, lib.Feedledger) else None,
            dlt if isinstance(dlt, lib.Dlt) else None,
            dbt if isinstance(dbt, lib.Dbt) else None,
        ),
        timeout=args.timeout,
    )
    ok = lib.crosscheck_ok(result)
    log(f"   cross-check of round 1's histories: {'agree' if ok else 'MISMATCH'}")
    result["ok"] = ok
    return result


def summarize(names: list[str], runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        mine = [r for r in runs if r["tool"] == name]
        first = [r for r in mine if r["day"] == 1]
        daily = [r for r in mine if r["day"] > 1]
        out[name] = {
            "first_load_s": stats([r["wall_s"] for r in first]),
            "daily_s": stats([r["wall_s"] for r in daily]),
            "first_load_rss_kib": max((r["maxrss_kib"] for r in first), default=None),
            "daily_rss_kib": max((r["maxrss_kib"] for r in daily), default=None),
            "peak_rss_kib": max((r["maxrss_kib"] for r in mine), default=None),
        }
    ref = out.get(REFERENCE)
    for s in out.values():
        s["vs_feedledger"] = None if ref is None else ratios(s, ref)
    return out


def _median(s: dict[str, Any], key: str) -> float | None:
    v = s.get(key)
    return None if v is None else float(v["median"])


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


def ratios(s: dict[str, Any], ref: dict[str, Any]) -> dict[str, float | None]:
    """This tool's figure divided by feedledger-sqlite's (2.0 = twice feedledger's)."""
    return {
        "first_load": _ratio(_median(s, "first_load_s"), _median(ref, "first_load_s")),
        "daily": _ratio(_median(s, "daily_s"), _median(ref, "daily_s")),
        "peak_rss": _ratio(s["peak_rss_kib"], ref["peak_rss_kib"]),
    }


def check_targets(summary: dict[str, Any]) -> dict[str, Any]:
    """Each target whose tools ran (a target needing dbt is left out of a run without it)."""
    fl = summary.get(REFERENCE)
    pg = summary.get("feedledger-postgresql")
    dlt = summary.get("dlt")
    dbt = summary.get("dbt")
    values: dict[str, float | None] = {}
    if fl and dlt:
        values["daily_vs_dlt"] = _ratio(_median(fl, "daily_s"), _median(dlt, "daily_s"))
        values["first_load_vs_dlt"] = _ratio(
            _median(fl, "first_load_s"), _median(dlt, "first_load_s")
        )
    if fl and dbt:
        values["daily_vs_dbt"] = _ratio(_median(fl, "daily_s"), _median(dbt, "daily_s"))
    if pg and dlt:
        values["postgresql_first_load_vs_dlt"] = _ratio(
            _median(pg, "first_load_s"), _median(dlt, "first_load_s")
        )
    if fl and dlt and dbt:
        lower_rss = min(dlt["peak_rss_kib"], dbt["peak_rss_kib"])
        values["peak_rss_vs_lower_peer"] = _ratio(fl["peak_rss_kib"], lower_rss)
    return {
        name: {
            "target": limit,
            "value": values[name],
            "met": None if values[name] is None else values[name] <= limit,
        }
        for name, limit in TARGETS.items()
        if name in values
    }


# --- report -------------------------------------------------------------------------------

TARGET_LABELS = {
    "daily_vs_dlt": "feedledger daily / dlt daily",
    "daily_vs_dbt": "feedledger daily / dbt daily",
    "first_load_vs_dlt": "feedledger first load / dlt first load",
    "postgresql_first_load_vs_dlt": "feedledger (PostgreSQL) first load / dlt first load",
    "peak_rss_vs_lower_peer": "feedledger peak RSS / lower peer peak RSS",
}


def _f(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f}"


def size_table(res: dict[str, Any]) -> list[str]:
    lines = []
    for name, s in res["summary"].items():
        first = s["first_load_s"] or {}
        daily = s["daily_s"] or {}
        vs = s["vs_feedledger"] or {}
        is_floor = name == "floor"
        lines.append(
            f"| {res['n']:,} | {name} | {_f(first.get('median'))} | {_f(daily.get('median'))} "
            f"| {_f(daily.get('min'))}–{_f(daily.get('max'))} | {_mib(s['first_load_rss_kib'])} "
            f"| {_mib(s['daily_rss_kib'])} | {_mib(s['peak_rss_kib'])} "
            f"| {'' if is_floor else _x(vs.get('first_load'))} "
            f"| {'' if is_floor else _x(vs.get('daily'))} "
            f"| {'' if is_floor else _x(vs.get('peak_rss'))} |"
        )
    return lines


def _crosscheck_section(title: str, cc: dict[str, Any]) -> list[str]:
    verdict = "all agree" if cc["ok"] else "MISMATCHES"
    return ["", f"{title}: {verdict}", "", lib.crosscheck_markdown(cc)]


def markdown(payload: dict[str, Any]) -> str:
    m = payload["machine"]
    pk = m["packages"]
    pv = payload["peer_versions"]
    cfg = payload["config"]
    lines = [
        f"Machine: {m['cpu']}, {m['nproc']} CPUs, {m['memory_total_gib']} GiB RAM (shared). "
        f"Python {m['python']}; feedledger {pk['feedledger']} ({m['git_revision']}), polars "
        f"{pk['polars']}, SQLite {m['sqlite']}"
        + (f", PostgreSQL {m['postgresql']}" if m.get("postgresql") else "")
        + f"; peers (bench/.peers, Python {pv.get('python')}): dlt {pv.get('dlt')}, dbt-core "
        f"{pv.get('dbt-core')}, dbt-duckdb {pv.get('dbt-duckdb')}, duckdb {pv.get('duckdb')}, "
        f"pyarrow {pv.get('pyarrow')}.",
        f"Days: {cfg['days']} (day 1 = first load), rounds: {cfg['rounds']}; first load = median "
        f"over rounds, daily = median over rounds x days 2..{cfg['days']}. Load average "
        f"(1/5/15 min) at start {m['loadavg_start']}, at end {m.get('loadavg_end')}.",
    ]
    if payload["results"]:
        lines += [
            "",
            "| N | tool | first load s | daily median s | daily min–max s | first load RSS MiB "
            "| daily RSS MiB | peak RSS MiB | first load vs feedledger | daily vs feedledger "
            "| peak RSS vs feedledger |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for res in payload["results"]:
            lines += size_table(res)
        lines += ["", "(vs feedledger = the tool's figure / feedledger-sqlite's.)"]
    for res in payload["results"]:
        la = ", ".join(
            f"r{x['round'] + 1} {x['loadavg_start'][0]}→{x['loadavg_end'][0]}"
            for x in res["loadavg"]
        )
        lines.append(f"Load average (1 min) per round, N = {res['n']:,}: {la}.")
    for res in payload["results"]:
        if res["targets"]:
            lines += ["", f"Targets (feedledger on SQLite, N = {res['n']:,}):", ""]
            lines += ["| target | value | limit | met |", "|---|---:|---:|---|"]
            for name, t in res["targets"].items():
                met = "-" if t["met"] is None else ("met" if t["met"] else "MISSED")
                lines.append(
                    f"| {TARGET_LABELS[name]} | {_f(t['value'])} | <= {t['target']:g} | {met} |"
                )
    for res in payload["results"]:
        if cc := res.get("crosscheck"):
            title = f"Cross-check of round 1's histories, N = {res['n']:,}, {res['days']} days"
            lines += _crosscheck_section(title, cc)
    if cc := payload.get("crosscheck"):
        title = f"Cross-check, N = {cc['n']:,}, {cc['days']} days, all three daily"
        lines += _crosscheck_section(title, cc)
    out = payload.get("outage")
    if out:
        s = out["summary"]
        lines += [
            "",
            f"Outage, N = {out['n']:,}: days 1-3 daily, days 4-6 not run, day 7 catch-up "
            "(feedledger: `archive add` of days 4..7 as the fetcher kept them, then "
            "`backfill --from day 4 --to day 7`; dlt and dbt: day 7's file loaded).",
            "",
            "| tool | versions | entities whose history = the publisher's (days 1-7) "
            "| differ | differ from days 1,2,3,7 only |",
            "|---|---:|---:|---:|---:|",
        ]
        lines.append(
            f"| (publisher's files) | {s['truth_versions']:,} | {s['entities']:,} | 0 | - |"
        )
        for tool in ("feedledger", "dlt", "dbt"):
            t = s[tool]
            lines.append(
                f"| {tool} | {t['versions']:,} | {t['entities_matching_publisher_history']:,} "
                f"| {t['entities_differing_from_publisher_history']:,} "
                f"| {t['entities_differing_from_days_1_2_3_7']:,} |"
            )
        lines += [
            "",
            "How each dated its versions (`valid_from` to the second: number of versions):",
            "",
            "| history | versions by `valid_from` |",
            "|---|---|",
        ]
        for tool, label in (
            ("truth", "(publisher's files)"),
            ("feedledger", "feedledger"),
            ("dlt", "dlt"),
            ("dbt", "dbt"),
        ):
            cells = " · ".join(f"{ts}: {count:,}" for ts, count in s["stamps"][tool])
            lines.append(f"| {label} | {cells} |")
        walls = s["catchup_wall_s"]
        lines += [
            "",
            "Day-7 catch-up wall time: feedledger backfill of 4 payloads "
            f"{walls['feedledger']:.2f} s, dlt {walls['dlt']:.2f} s, dbt {walls['dbt']:.2f} s "
            "(one load each).",
            "",
            out["markdown"],
        ]
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres(args: argparse.Namespace, names: list[str]) -> Iterator[ib.Postgres | None]:
    if not any(n.endswith("postgresql") for n in names):
        yield None
        return
    pg = ib.Postgres(args.postgres_url)
    try:
        yield pg
    finally:
        if not args.keep:
            with contextlib.suppress(Exception):
                pg.drop()
            if "feedledger-base-postgresql" in names:
                with contextlib.suppress(Exception):
                    ib.Postgres(args.postgres_url, "_base").drop()


def run(args: argparse.Namespace) -> int:
    lib.require_peers()
    lib.offline_env()
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    names = [t for t in TOOL_ORDER if t in args.tools]
    started = datetime.now(UTC)
    machine = ib.machine_info()
    payload: dict[str, Any] = {
        "benchmark": "peers",
        "started_at": started.isoformat(timespec="seconds"),
        "machine": machine,
        "peer_versions": lib.peer_versions(),
        "config": {
            "sizes": args.sizes,
            "days": args.days,
            "rounds": args.rounds,
            "tools": names,
            "seed": args.seed,
            "crosscheck": None if args.no_crosscheck else args.crosscheck,
            "outage": args.outage,
            "argv": sys.argv,
            "targets": TARGETS,
            "offline_env": lib.OFFLINE_ENV,
        },
        "results": [],
    }
    with postgres(args, names) as pg:
        if pg is not None:
            machine["postgresql"] = pg.server_version
        for n in [] if args.no_timing else args.sizes:
            payload["results"].append(run_size(args, n, names, pg))
    if not args.no_crosscheck and args.crosscheck:
        n, days = args.crosscheck
        log(f"== cross-check: N = {n:,}, {days} days, feedledger / dlt / dbt daily")
        files = lib.series(n, days, args.seed, args.timeout)
        cc = lib.crosscheck(files, args.runs_dir, args.timeout, args.keep)
        cc["ok"] = lib.crosscheck_ok(cc)
        log(f"   {'all agree' if cc['ok'] else 'MISMATCH'}")
        payload["crosscheck"] = cc
    if args.outage:
        log(f"== outage: N = {args.outage:,}, days 1-3 daily, 4-6 missed, day 7 catch-up")
        files = lib.series(args.outage, lib.OUTAGE_CATCHUP, args.seed, args.timeout)
        out = lib.outage(files, args.runs_dir, args.timeout, args.keep)
        out["summary"] = lib.outage_summary(out)
        payload["outage"] = out
    machine["loadavg_end"] = loadavg()
    payload["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    payload["harness_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = markdown(payload)
    payload["markdown"] = report
    path = save_results(
        args.results_dir,
        "peers",
        json.dumps(payload, indent=2, default=str) + "\n",
        stamp=started.strftime("%Y%m%dT%H%M%SZ"),
    )
    print(report)
    log(f"results: {path}")
    bad = [r["n"] for r in payload["results"] if r["crosscheck"] and not r["crosscheck"]["ok"]]
    if payload.get("crosscheck") and not payload["crosscheck"]["ok"]:
        bad.append(payload["crosscheck"]["n"])
    if bad:
        log(f"peers: the histories disagree (N = {bad}); see the JSON")
        return 1
    return 0


def _pair(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected N,DAYS (e.g. 10000,7)") from exc
    return n, d


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="feedledger vs dlt scd2 vs dbt snapshot, whole processes (bench/README.md)"
    )
    p.add_argument("--sizes", type=ib._csv_ints, default=SIZES, help="N values (100000,1000000)")
    p.add_argument("--days", type=int, default=5, help="days per series; day 1 = first load (5)")
    p.add_argument("--rounds", type=int, default=3, help="fresh-workspace rounds per N (3)")
    p.add_argument(
        "--tools",
        default=",".join(TOOL_ORDER),
        help=f"comma-separated among {','.join(TOOL_ORDER)} (default: all)",
    )
    p.add_argument("--seed", type=int, default=lib.DEFAULT_SEED)
    p.add_argument(
        "--crosscheck",
        type=_pair,
        default=(10_000, 7),
        help="N,DAYS of the dedicated cross-check (10000,7)",
    )
    p.add_argument("--no-crosscheck", action="store_true", help="skip every cross-check")
    p.add_argument(
        "--no-timing", action="store_true", help="skip the timed series (cross-check/outage only)"
    )
    p.add_argument(
        "--outage", type=int, default=10_000, help="N of the outage comparison; 0 skips (10000)"
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="N=1,000, D=3, 1 round; cross-check at 1000,7; no outage (test_outage.py has it)",
    )
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("FEEDLEDGER_BENCH_POSTGRES_URL", ib.DEFAULT_POSTGRES_URL),
        help="admin URL used to create and drop feedledger's scratch database",
    )
    p.add_argument(
        "--base-src",
        type=Path,
        help="a baseline tree's src/ (e.g. from `git archive`), run as the tools "
        "feedledger-base-sqlite / feedledger-base-postgresql through this venv",
    )
    p.add_argument("--runs-dir", type=Path, default=lib.RUNS_DIR)
    p.add_argument("--results-dir", type=Path, default=ib.RESULTS_DIR)
    p.add_argument("--keep", action="store_true", help="keep workspaces and the database")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    a = p.parse_args(argv)
    if a.smoke:
        a.sizes, a.days, a.rounds, a.crosscheck, a.outage = [1000], 3, 1, (1000, 7), 0
    a.tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    unknown = set(a.tools) - set(TOOL_ORDER)
    if unknown:
        p.error(f"unknown tools {sorted(unknown)}; choose among {TOOL_ORDER}")
    if any(t.startswith("feedledger-base-") for t in a.tools) and not a.base_src:
        p.error("the feedledger-base-* tools need --base-src DIR (a tree's src/)")
    if a.days < 2 or a.rounds < 1:
        p.error("--days must be >= 2 (a first load and a daily) and --rounds >= 1")
    if not os.access(lib.FEEDLEDGER, os.X_OK):
        p.error(f"feedledger not found at {lib.FEEDLEDGER} (run with .venv/bin/python)")
    a.runs_dir = a.runs_dir.resolve()
    a.results_dir = a.results_dir.resolve()
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except lib.CommandFailed as exc:
        proc = exc.proc
        log(f"\npeers: command failed ({exc}): {' '.join(proc.argv)}")
        if proc.stdout.strip():
            log("--- stdout (last 4000 chars) ---\n" + proc.stdout[-4000:])
        log("--- stderr (last 8000 chars) ---\n" + (proc.stderr.strip()[-8000:] or "(empty)"))
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
