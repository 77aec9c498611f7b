"""Backfill benchmark: recover 30 missed days of a 100,000-parcel feed, then retract and
replay the same window -- whole ``feedledger`` processes, as a user runs them.

For every backend, in a fresh workspace (PostgreSQL: a fresh scratch database):

    feedledger init [--store postgresql://.../feedledger_bench_<pid>]
    feedledger source add parcels --key parcel_id --format csv --kind snapshot
    feedledger ingest parcels parcels_2026-08-01.csv --published-at 2026-08-01   # live
    feedledger archive add parcels parcels_2026-08-DD.csv --published-at ...     # 30 days
    feedledger backfill parcels --from 2026-08-02 --to 2026-08-31 --json         # timed
    feedledger retract <backfill run id> --json                                  # timed
    feedledger replay parcels --from 2026-08-02 --json                           # timed

The data is ``gen_parcels.py`` (1 % changed, 0.1 % added, 0.1 % deleted per day), and
every step's change count is checked against its manifest. Targets (SQLite): backfill
<= 30 s; retract + replay <= 2x the backfill. Results: Markdown on stdout, JSON in
``bench/results/backfill-latest.json`` (bench/resultfiles.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_bench import (
    BENCH_DIR,
    DEFAULT_POSTGRES_URL,
    GEN_SCRIPT,
    RESULTS_DIR,
    RUNS_DIR,
    CommandFailed,
    Postgres,
    log,
    machine_info,
    parse_json_output,
    run_measured,
)
from resultfiles import save_results

SOURCE = "parcels"
TARGET_BACKFILL_S = 30.0
TARGET_REPAIR_FACTOR = 2.0


@dataclass
class Config:
    n: int
    days: int
    backends: list[str]
    feedledger: Path
    postgres_url: str
    timeout: float
    keep: bool


def generate(cfg: Config) -> tuple[list[dict[str, Any]], Path]:
    argv = [sys.executable, GEN_SCRIPT, "--n", cfg.n, "--days", cfg.days, "--json"]
    proc = run_measured(argv, BENCH_DIR, cfg.timeout)
    out = parse_json_output(proc.stdout)
    days: list[dict[str, Any]] = out["days"]
    return days, Path(days[0]["path"]).parent


def run_backend(cfg: Config, backend: str, days: list[dict[str, Any]]) -> dict[str, Any]:
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    ws = Path(tempfile.mkdtemp(prefix=f"backfill-{backend}-", dir=RUNS_DIR))
    pg = Postgres(cfg.postgres_url) if backend == "postgresql" else None
    fl = str(cfg.feedledger)

    def run(*args: str) -> Any:
        return run_measured([fl, *args], ws, cfg.timeout)

    try:
        if pg is not None:
            pg.recreate()
            run("init", "--store", pg.store_url)
        else:
            run("init")
        run("source", "add", SOURCE, "--key", "parcel_id", "--format", "csv")
        first, rest = days[0], days[1:]
        live = run("ingest", SOURCE, first["path"], "--published-at", first["published_at"])
        log(f"  {backend}: first load {live.wall_s:.2f}s")
        for d in rest:
            run("archive", "add", SOURCE, d["path"], "--published-at", d["published_at"])
        lo, hi = rest[0]["published_at"], rest[-1]["published_at"]
        back = run("backfill", SOURCE, "--from", lo, "--to", hi, "--json")
        report = parse_json_output(back.stdout)
        expected = [d["added"] + d["changed"] + d["deleted"] for d in rest]
        got = [s["changes"] for s in report["steps"]]
        log(f"  {backend}: backfill of {len(got)} payloads {back.wall_s:.2f}s")
        retract = run("retract", report["run_id"], "--json")
        log(f"  {backend}: retract {retract.wall_s:.2f}s")
        replay = run("replay", SOURCE, "--from", lo, "--json")
        again = parse_json_output(replay.stdout)
        log(f"  {backend}: replay {replay.wall_s:.2f}s")
        verify = run("verify", SOURCE, "--json")
        return {
            "backend": backend,
            "first_load": live.summary(),
            "backfill": back.summary(),
            "retract": {**retract.summary(), "output": parse_json_output(retract.stdout)},
            "replay": replay.summary(),
            "payloads": len(got),
            "changes": sum(got),
            "counts_ok": got == expected and [s["changes"] for s in again["steps"]] == expected,
            "verify_ok": parse_json_output(verify.stdout)["ok"],
            "repair_s": round(retract.wall_s + replay.wall_s, 3),
        }
    finally:
        if not cfg.keep:
            shutil.rmtree(ws, ignore_errors=True)
            if pg is not None:
                pg.drop()


def markdown(results: list[dict[str, Any]], cfg: Config) -> str:
    lines = [
        f"Backfill of {cfg.days - 1} archived daily payloads of {cfg.n:,} parcels "
        "(whole processes; wall seconds, peak RSS MiB).",
        "",
        "| backend | backfill s | per payload s | retract s | replay s | retract + replay s "
        "| repair / backfill | peak RSS MiB | counts | verify | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        back = r["backfill"]["wall_s"]
        factor = r["repair_s"] / back
        rss = max(r[k]["maxrss_kib"] for k in ("backfill", "retract", "replay")) / 1024
        missed = []
        if r["backend"] == "sqlite":
            if back > TARGET_BACKFILL_S:
                missed.append(f"backfill {back:.1f} > {TARGET_BACKFILL_S:.0f} s")
            if factor > TARGET_REPAIR_FACTOR:
                missed.append(f"repair {factor:.2f}x > {TARGET_REPAIR_FACTOR:.0f}x")
        lines.append(
            f"| {r['backend']} | {back:.2f} | {back / r['payloads']:.3f} "
            f"| {r['retract']['wall_s']:.2f} | {r['replay']['wall_s']:.2f} | {r['repair_s']:.2f} "
            f"| {factor:.2f} | {rss:.0f} | {'ok' if r['counts_ok'] else 'WRONG'} "
            f"| {'ok' if r['verify_ok'] else 'MISMATCH'} "
            f"| {'MISSED: ' + '; '.join(missed) if missed else 'met'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="parcels (100000)")
    ap.add_argument("--days", type=int, default=31, help="days incl. the live first (31)")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--feedledger", type=Path, default=Path(sys.executable).parent / "feedledger")
    ap.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--keep", action="store_true", help="keep workspaces and databases")
    args = ap.parse_args(argv)
    cfg = Config(
        n=args.n,
        days=args.days,
        backends=[b for b in args.backends.split(",") if b],
        feedledger=args.feedledger,
        postgres_url=args.postgres_url,
        timeout=args.timeout,
        keep=args.keep,
    )
    log(f"== generating {cfg.days} days of {cfg.n:,} parcels")
    days, _where = generate(cfg)
    results = []
    try:
        for backend in cfg.backends:
            log(f"== {backend}")
            results.append(run_backend(cfg, backend, days))
    except CommandFailed as exc:
        log(f"command failed: {' '.join(exc.proc.argv)}\n{exc.proc.stderr}")
        return 1
    table = markdown(results, cfg)
    print(table)
    payload = {
        "machine": machine_info(),
        "config": vars(args) | {"feedledger": str(cfg.feedledger)},
        "results": results,
        "markdown": table,
    }
    path = save_results(RESULTS_DIR, "backfill", json.dumps(payload, indent=2, default=str) + "\n")
    log(f"results: {path}")
    ok = all(r["counts_ok"] and r["verify_ok"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
