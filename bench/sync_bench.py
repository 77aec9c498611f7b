"""Destination rebuild and reconcile benchmark: N parcels into a PostgreSQL search table.

    .venv/bin/python bench/sync_bench.py [--n 1000000] [--sqlite-destination] [--keep]
        [--payload FILE --published-at DATE] [--rounds R]

Day 1 of the ``gen_parcels.py`` feed (N parcels, generated in a child process or reused
from the cache in ``bench/.work/``) is ingested into a fresh SQLite workspace. A
destination ``bench`` is declared on a table of its own (``sync_bench_<pid>``, in
PostgreSQL with a tsvector over ``owner`` and ``address``, or with ``--sqlite-destination``
a SQLite file in the workspace) and a manifest freezes the population (every live key).
Then, each one whole ``feedledger`` process, timed from spawn to exit:

    feedledger sync bench --manifest m --json        # the rebuild: every key accepted
    feedledger reconcile bench --manifest m --json   # must answer complete = true
    feedledger sync bench --manifest m --json        # again: every key already_current

documents/s = N / wall of a sync process. Targets (N = 1,000,000, PostgreSQL): rebuild
>= 50,000 documents/s, reconcile <= 15 s.

The server's floor (PostgreSQL): the same N documents (copied once from the destination
after the first rebuild into an unlogged staging table of the same column types) are
loaded into a fresh table of the destination's shape (``LIKE ... INCLUDING ALL``: the
primary key, the generated tsvector and its GIN index) by ONE statement, ``INSERT ...
SELECT ... ON CONFLICT (key) DO UPDATE ... WHERE <the guard>``, then the same statement
again (the no-op rerun). With ``--rounds R`` the floor and the sync (rebuild into a
dropped table, then resync) alternate R times, the order flipping each round; the table
gives medians and the ratios floor / sync (>= 1: the sync keeps the server's pace).
The table is dropped and the workspace removed at the end unless ``--keep``. Results: a
Markdown table on stdout, JSON in ``bench/results/sync-latest.json``
(bench/resultfiles.py); progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from feedledger.sync.guard import GUARD
from feedledger.sync.target import COLUMNS
from ingest_bench import (
    BENCH_DIR,
    DEFAULT_SEED,
    GEN_SCRIPT,
    RESULTS_DIR,
    RUNS_DIR,
    CommandFailed,
    Proc,
    log,
    machine_info,
    parse_json_output,
    psycopg_url,
    run_measured,
)
from resultfiles import save_results

DEFAULT_DESTINATION_URL = "postgresql://postgres@127.0.0.1:5432/test"
SOURCE = "parcels"
DESTINATION = "bench"
MANIFEST = "m"
TEXT_FIELDS = "owner,address"
TARGET_REBUILD_DOCS_PER_S = 50_000.0  # PostgreSQL, N = 1,000,000
TARGET_RECONCILE_S = 15.0  # N = 1,000,000


def generate_day1(n: int, seed: int, timeout: float) -> tuple[Path, dict[str, Any]]:
    """Day 1 of the parcel feed (``gen_parcels.py --days 1``, cached), in a child process
    so that this harness never loads polars (see ingest_bench)."""
    argv = [sys.executable, str(GEN_SCRIPT), "--n", str(n), "--days", "1", "--seed", str(seed)]
    proc = run_measured([*argv, "--json"], BENCH_DIR, timeout)
    out = parse_json_output(proc.stdout)
    day = out["days"][0]
    for line in proc.stderr.splitlines():
        log("   " + line)
    return Path(day["path"]), {**proc.summary(), "day": day, "seed": out["seed"]}


class Destination:
    """The destination table: its row count, and dropping it (PostgreSQL or SQLite)."""

    def __init__(self, pg_url: str | None, sqlite_path: Path | None, table: str) -> None:
        self.pg_url, self.sqlite_path, self.table = pg_url, sqlite_path, table

    def args(self) -> list[str]:
        if self.pg_url is not None:
            return ["--postgres", self.pg_url, "--table", self.table]
        return ["--sqlite", str(self.sqlite_path), "--table", self.table]

    def server_version(self) -> str | None:
        if self.pg_url is None:
            return None
        import psycopg

        with psycopg.connect(psycopg_url(self.pg_url), autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else None

    def _query(self, sql: str) -> Any:
        if self.pg_url is not None:
            import psycopg

            with psycopg.connect(psycopg_url(self.pg_url), autocommit=True) as conn:
                row = conn.execute(sql).fetchone()
            return row[0] if row else None
        with contextlib.closing(sqlite3.connect(str(self.sqlite_path))) as conn:
            got = conn.execute(sql).fetchone()
        return got[0] if got else None

    def count(self) -> int:
        return int(self._query(f"SELECT count(*) FROM {self.table}"))

    def size_bytes(self) -> int | None:
        if self.pg_url is None:
            return self.sqlite_path.stat().st_size if self.sqlite_path else None
        return int(self._query(f"SELECT pg_total_relation_size('{self.table}')"))

    def drop(self) -> None:
        if self.pg_url is not None:
            import psycopg

            with psycopg.connect(psycopg_url(self.pg_url), autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {self.table}")


class Floor:
    """The server's pace: the same documents, loaded server-side from a staging table into
    a fresh table of the destination's shape in one guarded statement, then again (a
    no-op: every row is current). Timed around the statement (its commit included)."""

    def __init__(self, pg_url: str, table: str) -> None:
        self.pg_url, self.dest = pg_url, table
        self.stage, self.table = f"{table}_floor_stage", f"{table}_floor"

    def _conn(self) -> Any:
        import psycopg

        return psycopg.connect(psycopg_url(self.pg_url), autocommit=True)

    def stage_from_destination(self) -> None:
        cols = ", ".join(COLUMNS)
        with self._conn() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {self.stage}")
            conn.execute(
                f"CREATE UNLOGGED TABLE {self.stage} AS SELECT {cols} FROM {self.dest} ORDER BY key"
            )
            conn.execute(f"VACUUM ANALYZE {self.stage}")
            # the documents as text, as a client sends them (parsed into jsonb by the load)
            text_cols = ", ".join("doc::text AS doc" if c == "doc" else c for c in COLUMNS)
            conn.execute(f"DROP TABLE IF EXISTS {self.stage}_text")
            conn.execute(
                f"CREATE UNLOGGED TABLE {self.stage}_text AS SELECT {text_cols} FROM {self.stage}"
            )
            conn.execute(f"VACUUM ANALYZE {self.stage}_text")

    def run(self) -> dict[str, float]:
        cols = ", ".join(COLUMNS)
        sets = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
        now = "(extract(epoch from clock_timestamp()) * 1000000)::bigint"
        values = ", ".join("doc::jsonb" if c == "doc" else c for c in COLUMNS)

        def upsert(stage: str, select: str) -> str:
            return (
                f"INSERT INTO {self.table} AS t ({cols}) SELECT {select} FROM {stage} "
                f"ON CONFLICT (key) DO UPDATE SET {sets}, written_at = {now} WHERE {GUARD}"
            )

        out: dict[str, float] = {}
        with self._conn() as conn:
            steps = (
                ("floor_load", upsert(self.stage, cols)),
                ("floor_noop", upsert(self.stage, cols)),
                ("floor_load_text", upsert(self.stage + "_text", values)),
            )
            for step, sql in steps:
                if step != "floor_noop":
                    conn.execute(f"DROP TABLE IF EXISTS {self.table}")
                    conn.execute(f"CREATE TABLE {self.table} (LIKE {self.dest} INCLUDING ALL)")
                t0 = time.perf_counter()
                cur = conn.execute(sql)
                out[step] = time.perf_counter() - t0
                out[step + "_rows"] = cur.rowcount
        log(
            f"  floor load     {out['floor_load']:7.2f}s  (rows {out['floor_load_rows']:,}); "
            f"no-op {out['floor_noop']:.2f}s (rows {out['floor_noop_rows']:,}); "
            f"load from text {out['floor_load_text']:.2f}s"
        )
        return out

    def drop(self) -> None:
        with self._conn() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            conn.execute(f"DROP TABLE IF EXISTS {self.stage}")
            conn.execute(f"DROP TABLE IF EXISTS {self.stage}_text")


def run_json(argv: list[str], ws: Path, timeout: float, ok_codes: tuple[int, ...] = (0,)) -> Proc:
    """run_measured, also accepting the exit codes in ``ok_codes`` (reconcile exits 1 when
    the destination is not complete, with its JSON report on stdout)."""
    try:
        return run_measured(argv, ws, timeout)
    except CommandFailed as exc:
        if exc.proc.returncode in ok_codes and exc.proc.wall_s < timeout:
            return exc.proc
        raise


def measured_step(
    name: str, argv: list[str], ws: Path, timeout: float, n: int, ok_codes: tuple[int, ...] = (0,)
) -> dict[str, Any]:
    proc = run_json(argv, ws, timeout, ok_codes)
    try:
        output = parse_json_output(proc.stdout)
    except ValueError as exc:
        raise CommandFailed(proc, f"--json printed no JSON object ({exc})") from exc
    step = {"step": name, **proc.summary(), "documents_per_s": round(n / proc.wall_s, 1)}
    step["output"] = output
    log(
        f"  {name:14s} {proc.wall_s:7.2f}s  {n / proc.wall_s:>9,.0f} docs/s  "
        f"{proc.maxrss_kib / 1024:6.0f} MiB  in-process {output.get('seconds', '-')}"
    )
    return step


def markdown(result: dict[str, Any]) -> str:
    n, kind = result["n"], result["destination"]["kind"]
    lines = [
        "| destination | N | step | wall s | in-process s | documents/s | peak RSS MiB "
        "| result | target |",
        "|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for s in result["steps"]:
        out = s["output"]
        if s["step"] == "reconcile":
            verdict = (
                f"complete={str(out.get('complete')).lower()}, "
                f"{out.get('buckets_differing')}/{out.get('buckets')} buckets differ"
            )
            target = f"<= {TARGET_RECONCILE_S:g} s"
            met = out.get("complete") is True and s["wall_s"] <= TARGET_RECONCILE_S
            inproc = "-"
        else:
            verdict = ", ".join(f"{k} {v:,}" for k, v in out.get("outcomes", {}).items() if v)
            # the rebuild target is defined for a PostgreSQL destination
            rebuild = s["step"] == "rebuild" and kind == "postgres"
            target = f">= {TARGET_REBUILD_DOCS_PER_S:,.0f}/s" if rebuild else ""
            met = s["documents_per_s"] >= TARGET_REBUILD_DOCS_PER_S
            inproc = f"{out.get('seconds', 0):.2f}"
        target_txt = "-" if not target else f"{target}: {'met' if met else 'MISSED'}"
        lines.append(
            f"| {kind} | {n:,} | {s['step']} r{s['round']} | {s['wall_s']:.2f} | {inproc} "
            f"| {s['documents_per_s']:,.0f} | {s['maxrss_kib'] / 1024:.0f} | {verdict} "
            f"| {target_txt} |"
        )
    for f in result.get("floor", []):
        for step, label in (
            ("floor_load", "floor (one statement)"),
            ("floor_noop", "floor no-op"),
            ("floor_load_text", "floor from text docs"),
        ):
            lines.append(
                f"| {kind} | {n:,} | {label} r{f['round']} | {f[step]:.2f} | - "
                f"| {n / f[step]:,.0f} | - | rows written {f[step + '_rows']:,} | - |"
            )
    for step, r in result.get("ratios", {}).items():
        lines.append(
            f"\n{step}: floor {r['floor_s']:.2f} s / sync {r['wall_s']:.2f} s wall = "
            f"**{r['floor_over_wall']:.3f}** (in-process {r['in_process_s']:.2f} s: "
            f"{r['floor_over_in_process']:.3f}); medians of {r['rounds']} rounds"
        )
    return "\n".join(lines)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ratios(steps: list[dict[str, Any]], floors: list[dict[str, float]]) -> dict[str, Any]:
    """Medians over rounds, and floor / sync (>= 1: as fast as the server's floor): by the
    whole process's wall clock and by the seconds the sync reports itself."""
    out: dict[str, Any] = {}
    for step, fkey in (
        ("rebuild", "floor_load"),
        ("resync", "floor_noop"),
        ("rebuild", "floor_load_text"),
    ):
        wall = _median([s["wall_s"] for s in steps if s["step"] == step])
        inproc = _median([s["output"]["seconds"] for s in steps if s["step"] == step])
        fl = _median([f[fkey] for f in floors])
        out[f"{step} vs {fkey}"] = {
            "floor_s": round(fl, 3),
            "wall_s": round(wall, 3),
            "in_process_s": round(inproc, 3),
            "floor_over_wall": round(fl / wall, 3),
            "floor_over_in_process": round(fl / inproc, 3),
            "rounds": len(floors),
        }
    return out


def check(result: dict[str, Any]) -> list[str]:
    """What is wrong with the run (empty: the outcomes and the table are as they must be)."""
    n, problems = result["n"], []
    for s in result["steps"]:
        got = s["output"].get("outcomes", {})
        want = {"rebuild": "accepted", "resync": "already_current"}.get(s["step"])
        if want is not None and (got.get(want) != n or sum(got.values()) != n):
            problems.append(f"round {s['round']} {s['step']}: outcomes {got}, not {want} {n}")
    for f in result.get("floor", []):
        if f["floor_load_rows"] != n or f["floor_noop_rows"] != 0 or f["floor_load_text_rows"] != n:
            problems.append(
                f"round {f['round']} floor: rows {f['floor_load_rows']}, "
                f"then {f['floor_noop_rows']}"
            )
    by = {s["step"]: s["output"] for s in result["steps"]}
    if by["reconcile"].get("complete") is not True:
        problems.append("reconcile: complete is not true")
    if result["destination"]["rows"] != n:
        problems.append(f"destination table holds {result['destination']['rows']} rows != {n}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="parcels (%(default)s)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed")
    ap.add_argument(
        "--postgres-url",
        default=os.environ.get("FEEDLEDGER_BENCH_DESTINATION_URL", DEFAULT_DESTINATION_URL),
        help="destination database (default: %(default)s)",
    )
    ap.add_argument(
        "--sqlite-destination",
        action="store_true",
        help="a SQLite destination file in the workspace instead of PostgreSQL",
    )
    ap.add_argument("--table", default=f"sync_bench_{os.getpid()}", help="destination table")
    ap.add_argument("--feedledger", type=Path, default=Path(sys.executable).parent / "feedledger")
    ap.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help="JSON output (%(default)s)"
    )
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    ap.add_argument("--keep", action="store_true", help="keep the workspace and the table")
    ap.add_argument(
        "--payload",
        type=Path,
        help="day 1's CSV to ingest instead of generating one (with --published-at)",
    )
    ap.add_argument("--published-at", help="the payload's published-at date (with --payload)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="floor / sync rounds, alternating (%(default)s)"
    )
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be >= 1")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if (args.payload is None) != (args.published_at is None):
        ap.error("--payload and --published-at go together")

    machine = machine_info()
    log(f"== N = {args.n:,}: data")
    if args.payload is not None:
        payload_file = args.payload
        gen = {"day": {"path": str(payload_file), "published_at": args.published_at}}
    else:
        payload_file, gen = generate_day1(args.n, args.seed, args.timeout)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    kind = "sqlite" if args.sqlite_destination else "postgres"
    ws = Path(tempfile.mkdtemp(prefix=f"sync-{kind}-n{args.n}-", dir=RUNS_DIR))
    dest = Destination(
        None if args.sqlite_destination else args.postgres_url,
        ws / "destination.sqlite" if args.sqlite_destination else None,
        args.table,
    )
    fl = str(args.feedledger)
    t = args.timeout
    result: dict[str, Any] = {
        "benchmark": "sync",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        "n": args.n,
        "feedledger": str(args.feedledger),
        "data": gen,
        "workspace": str(ws),
        "targets": {
            "rebuild_documents_per_s": TARGET_REBUILD_DOCS_PER_S,
            "reconcile_s": TARGET_RECONCILE_S,
        },
    }
    failed = False
    floor: Floor | None = None
    try:
        machine["postgresql"] = dest.server_version()
        setup: dict[str, Any] = {}
        setup["init"] = run_measured([fl, "init"], ws, t).summary()
        add = [fl, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv"]
        setup["source_add"] = run_measured([*add, "--kind", "snapshot"], ws, t).summary()
        log(f"== ingest {payload_file.name} into {ws}")
        ingest = [fl, "ingest", SOURCE, payload_file, "--published-at", gen["day"]["published_at"]]
        setup["ingest"] = run_measured(ingest, ws, t).summary()
        log(f"   ingest {setup['ingest']['wall_s']:.2f}s")
        dadd = [fl, "destination", "add", DESTINATION, "--source", SOURCE, *dest.args()]
        setup["destination_add"] = run_measured([*dadd, "--text-fields", TEXT_FIELDS], ws, t)
        setup["destination_add"] = setup["destination_add"].summary()
        mc = [fl, "manifest", "create", MANIFEST, "--source", SOURCE, "--json"]
        setup["manifest_create"] = run_measured(mc, ws, t).summary()
        log(f"   manifest create {setup['manifest_create']['wall_s']:.2f}s")
        result["setup"] = setup

        log(f"== {kind} destination, table {args.table}")
        sync = [fl, "sync", DESTINATION, "--manifest", MANIFEST, "--json"]
        rec = [fl, "reconcile", DESTINATION, "--manifest", MANIFEST, "--json"]
        if kind == "postgres":
            floor = Floor(args.postgres_url, args.table)
        steps: list[dict[str, Any]] = []
        floors: list[dict[str, float]] = []
        for r in range(args.rounds):
            log(f"-- round {r + 1} of {args.rounds}")
            # the floor needs the documents (staged from the first rebuild): sync first
            # in round 1, then the order flips every round
            order = ("sync", "floor") if r % 2 == 0 else ("floor", "sync")
            for what in order:
                if what == "floor":
                    if floor is not None:
                        floors.append({"round": r + 1, **floor.run()})
                    continue
                if r:
                    dest.drop()  # a rebuild into an empty table again
                steps.append({"round": r + 1, **measured_step("rebuild", sync, ws, t, args.n)})
                if r == 0:
                    recon = measured_step("reconcile", rec, ws, t, args.n, ok_codes=(0, 1))
                    steps.append({"round": 1, **recon})
                    if floor is not None:
                        floor.stage_from_destination()
                steps.append({"round": r + 1, **measured_step("resync", sync, ws, t, args.n)})
        result["steps"] = steps
        result["floor"] = floors
        if floors:
            result["ratios"] = ratios(steps, floors)
        result["destination"] = {
            "kind": kind,
            "table": args.table,
            "text_fields": TEXT_FIELDS,
            "rows": dest.count(),
            "bytes": dest.size_bytes(),
        }
    except CommandFailed as exc:
        failed = True
        proc = exc.proc
        log(f"\nsync_bench: command failed ({exc}): {' '.join(proc.argv)}")
        if proc.stdout.strip():
            log("--- stdout (last 4000 chars) ---\n" + proc.stdout[-4000:])
        log("--- stderr ---\n" + (proc.stderr.strip() or "(empty)"))
        log(f"(workspace kept for inspection: {ws})")
        return 1
    finally:
        if not args.keep:
            with contextlib.suppress(Exception):
                dest.drop()
            if floor is not None:
                with contextlib.suppress(Exception):
                    floor.drop()
            if not failed:
                shutil.rmtree(ws, ignore_errors=True)

    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["harness_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problems = check(result)
    result["problems"] = problems
    table = markdown(result)
    result["markdown"] = table
    print(table)
    path = save_results(args.results_dir, "sync", json.dumps(result, indent=2) + "\n")
    log(f"results: {path}")
    for p in problems:
        log(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
