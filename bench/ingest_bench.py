"""Ingest benchmark: whole ``feedledger`` processes over synthetic daily parcel snapshots.

For every N in ``--sizes`` the parcel feed is generated (or reused from the cache in
``bench/.work/``) by ``gen_parcels.py``, and the floor -- ``floor.py`` reading and hashing
each file -- is measured. Then, for every backend in ``--backends``, in a fresh workspace
directory (and, for PostgreSQL, a fresh database), exactly what a user would type runs:

    feedledger init [--store postgresql://.../feedledger_bench_<pid>]
    feedledger source add parcels --key parcel_id --format csv --kind snapshot
    feedledger ingest parcels parcels_2026-08-DD.csv --published-at 2026-08-DD --json

Each command is one child process; its wall time and peak RSS (``ru_maxrss`` from
``os.wait4``) are recorded. Results: a Markdown table on stdout, JSON in
``bench/results/ingest-latest.json`` (bench/resultfiles.py).
Progress goes to stderr. A failing command prints its stderr and stops the run (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from resultfiles import save_results

# This process must stay small: on Linux a child's ru_maxrss can never be lower than the
# high-water RSS of the parent that spawned it (exec records the pre-exec mm's peak, and
# with vfork that mm is ours). So the data is generated in a child process, and neither
# polars nor the data is ever loaded here; the harness's own peak RSS is recorded too.
BENCH_DIR = Path(__file__).resolve().parent
GEN_SCRIPT = BENCH_DIR / "gen_parcels.py"
FLOOR_SCRIPT = BENCH_DIR / "floor.py"
DEFAULT_SEED = 20260801  # gen_parcels.DEFAULT_SEED
RESULTS_DIR = BENCH_DIR / "results"
RUNS_DIR = BENCH_DIR / ".work" / "runs"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SOURCE = "parcels"
BACKENDS = ("sqlite", "postgresql")
GIB = 1024**3

# Targets per backend (checked for every N; they are defined for N = 1,000,000).
TARGETS: dict[str, dict[str, float]] = {
    "sqlite": {
        "first_load_s": 10.0,
        "daily_median_s": 2.0,
        "daily_over_floor": 2.0,
        "peak_rss_gib": 1.5,
    },
    "postgresql": {
        "first_load_s": 15.0,
        "daily_median_s": 3.0,
    },
}
TARGET_LABELS = {
    "first_load_s": "first load (s)",
    "daily_median_s": "daily median (s)",
    "daily_over_floor": "daily median / floor median",
    "peak_rss_gib": "peak RSS (GiB)",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- running one child process ----------------------------------------------------------


@dataclass
class Proc:
    argv: list[str]
    returncode: int
    wall_s: float
    maxrss_kib: int
    user_s: float
    sys_s: float
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)

    def summary(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "returncode": self.returncode,
            "wall_s": round(self.wall_s, 4),
            "maxrss_kib": self.maxrss_kib,
            "user_s": round(self.user_s, 3),
            "sys_s": round(self.sys_s, 3),
        }


class CommandFailed(Exception):
    def __init__(self, proc: Proc, why: str = "") -> None:
        super().__init__(why or f"exit status {proc.returncode}")
        self.proc = proc


def run_measured(argv: Sequence[str], cwd: Path, timeout: float) -> Proc:
    """Run ``argv`` as a child and measure it: wall clock and the child's own rusage.

    ``os.wait4`` reaps exactly this child and returns its resource usage; ``ru_maxrss``
    is its peak resident set size in KiB (Linux). stdout/stderr go to temporary files so
    the child can never block on a full pipe while we wait.
    """
    argv = [str(a) for a in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        proc = Proc(
            argv=argv,
            returncode=child.returncode,
            wall_s=wall,
            maxrss_kib=usage.ru_maxrss,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )
    if wall >= timeout and proc.returncode != 0:
        raise CommandFailed(proc, f"timed out after {timeout:.0f}s")
    if proc.returncode != 0:
        raise CommandFailed(proc)
    return proc


def parse_json_output(stdout: str) -> dict[str, Any]:
    """The JSON object printed by ``--json`` (the whole stdout, or else its last JSON line)."""
    text = stdout.strip()
    with contextlib.suppress(ValueError):
        obj = json.loads(text)
        if isinstance(obj, dict):
            return obj
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                return obj
    raise ValueError("no JSON object on stdout")


def extract_counts(obj: dict[str, Any]) -> dict[str, int | None]:
    """``added``/``changed``/``deleted`` from the top level or a nested object."""
    found: dict[str, int | None] = {}
    todo: list[dict[str, Any]] = [obj]
    while todo and len(found) < 3:
        cur = todo.pop(0)
        for key in ("added", "changed", "deleted"):
            if key not in found and isinstance(cur.get(key), int):
                found[key] = cur[key]
        todo.extend(v for v in cur.values() if isinstance(v, dict))
    return {key: found.get(key) for key in ("added", "changed", "deleted")}


# --- backends ---------------------------------------------------------------------------


def psycopg_url(url: str) -> str:
    """A libpq URL for psycopg (drops a SQLAlchemy ``+driver`` suffix from the scheme)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.split("+", 1)[0]))


def url_with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


class Postgres:
    """Creates (and drops) the benchmark's own scratch database on a PostgreSQL server."""

    def __init__(self, admin_url: str, suffix: str = "") -> None:
        import psycopg

        self._psycopg = psycopg
        self.admin_url = admin_url
        self.database = f"feedledger_bench_{os.getpid()}{suffix}"
        self.store_url = url_with_database(admin_url, self.database)
        try:
            with self._connect() as conn:
                row = conn.execute("SHOW server_version").fetchone()
        except psycopg.Error as exc:
            raise SystemExit(
                f"ingest_bench: cannot reach PostgreSQL at {admin_url} ({exc}); set "
                "FEEDLEDGER_BENCH_POSTGRES_URL or use --backends sqlite"
            ) from exc
        self.server_version = str(row[0]) if row else "?"

    def _connect(self) -> Any:
        return self._psycopg.connect(psycopg_url(self.admin_url), autocommit=True)

    def _drop(self, conn: Any) -> None:
        from psycopg import sql

        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.database))
        )

    def recreate(self) -> None:
        from psycopg import sql

        with self._connect() as conn:
            self._drop(conn)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))

    def size_bytes(self) -> int | None:
        with self._connect() as conn:
            row = conn.execute("SELECT pg_database_size(%s)", (self.database,)).fetchone()
        return int(row[0]) if row else None

    def drop(self) -> None:
        with self._connect() as conn:
            self._drop(conn)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# --- statistics and targets ---------------------------------------------------------------


def stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "mean": round(statistics.fmean(values), 4),
        "count": len(values),
    }


def check_targets(backend: str, summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    values = {
        "first_load_s": summary["first_load"]["wall_s"]["median"],
        "daily_median_s": (summary["daily"]["wall_s"] or {}).get("median"),
        "daily_over_floor": summary["daily_over_floor"],
        "peak_rss_gib": summary["peak_rss_kib"] * 1024 / GIB,
    }
    checks: dict[str, dict[str, Any]] = {}
    for name, limit in TARGETS.get(backend, {}).items():
        value = values[name]
        checks[name] = {
            "target": limit,
            "value": None if value is None else round(value, 4),
            "met": None if value is None else value <= limit,
        }
    return checks


# --- machine info -----------------------------------------------------------------------


def _meminfo_total() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _git_revision() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        root = BENCH_DIR.parent
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return (rev + ("-dirty" if dirty else "")) or None
    return None


def machine_info() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for dist in ("feedledger", "polars", "polars-hash", "pyarrow", "sqlalchemy", "psycopg"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    mem = _meminfo_total()
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "nproc_available": len(os.sched_getaffinity(0)),
        "memory_total_gib": None if mem is None else round(mem / GIB, 2),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "packages": versions,
        "git_revision": _git_revision(),
        # Other work on the machine skews every number: recorded at start (and end).
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


# --- the benchmark ------------------------------------------------------------------------


@dataclass
class Config:
    sizes: list[int]
    days: int
    backends: list[str]
    repeat: int
    seed: int
    feedledger: Path
    postgres_url: str
    runs_dir: Path
    results_dir: Path
    keep: bool
    timeout: float


@dataclass(frozen=True)
class DayFile:
    """One generated snapshot and the counts an ingest of it must report."""

    day: int
    published_at: str
    path: Path
    added: int
    changed: int
    deleted: int
    rows: int


def generate(cfg: Config, n: int) -> tuple[list[DayFile], dict[str, Any]]:
    """Generate (or reuse) the feed for ``n`` parcels in a child process (see top)."""
    argv = [sys.executable, GEN_SCRIPT, "--n", n, "--days", cfg.days, "--seed", cfg.seed]
    proc = run_measured([*argv, "--json"], BENCH_DIR, cfg.timeout)
    out = parse_json_output(proc.stdout)
    files = [DayFile(**{**d, "path": Path(d["path"])}) for d in out["days"]]
    for line in proc.stderr.splitlines():
        log("   " + line)
    return files, {**proc.summary(), "gen_version": out["gen_version"], "seed": out["seed"]}


def measure_floor(cfg: Config, files: list[DayFile]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for rep in range(cfg.repeat):
        for f in files:
            proc = run_measured([sys.executable, FLOOR_SCRIPT, f.path], BENCH_DIR, cfg.timeout)
            inner = parse_json_output(proc.stdout)
            runs.append({"repeat": rep, "day": f.day, **proc.summary(), "floor": inner})
            log(f"  floor day {f.day:2d}: {proc.wall_s:6.2f}s  {proc.maxrss_kib / 1024:7.0f} MiB")
    daily = [r for r in runs if r["day"] > 1]
    first = [r for r in runs if r["day"] == 1]
    return {
        "runs": runs,
        "first_day_wall_s": stats([r["wall_s"] for r in first]),
        "daily_wall_s": stats([r["wall_s"] for r in daily]),
        "all_wall_s": stats([r["wall_s"] for r in runs]),
        "peak_rss_kib": max(r["maxrss_kib"] for r in runs),
    }


def run_backend_once(
    cfg: Config,
    backend: str,
    files: list[DayFile],
    rep: int,
    pg: Postgres | None,
) -> dict[str, Any]:
    n = files[0].rows
    pg = pg if backend == "postgresql" else None
    cfg.runs_dir.mkdir(parents=True, exist_ok=True)
    ws = Path(tempfile.mkdtemp(prefix=f"{backend}-n{n}-r{rep}-", dir=cfg.runs_dir))
    exe = str(cfg.feedledger)
    run: dict[str, Any] = {"repeat": rep, "workspace": str(ws)}
    try:
        init = [exe, "init"]
        if backend == "postgresql":
            assert pg is not None
            pg.recreate()
            init += ["--store", pg.store_url]
        run["init"] = run_measured(init, ws, cfg.timeout).summary()
        add = [exe, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv"]
        add += ["--kind", "snapshot"]
        run["source_add"] = run_measured(add, ws, cfg.timeout).summary()
        ingests: list[dict[str, Any]] = []
        for f in files:
            argv = [exe, "ingest", SOURCE, f.path, "--published-at", f.published_at, "--json"]
            proc = run_measured(argv, ws, cfg.timeout)
            try:
                output = parse_json_output(proc.stdout)
            except ValueError as exc:
                raise CommandFailed(proc, f"--json printed no JSON object ({exc})") from exc
            counts = extract_counts(output)
            expected = {"added": f.added, "changed": f.changed, "deleted": f.deleted}
            ok = counts == expected
            ingests.append(
                {
                    "day": f.day,
                    "published_at": f.published_at,
                    "file": str(f.path),
                    **proc.summary(),
                    "counts": counts,
                    "expected": expected,
                    "counts_ok": ok,
                    "output": output,
                }
            )
            log(
                f"  {backend:10s} n={n:>9,} r{rep} day {f.day:2d}: {proc.wall_s:6.2f}s "
                f"{proc.maxrss_kib / 1024:7.0f} MiB  {counts}" + ("" if ok else f" != {expected}")
            )
        run["ingests"] = ingests
        run["workspace_bytes"] = dir_size(ws)
        if pg is not None:
            run["database_bytes"] = pg.size_bytes()
    except BaseException:
        log(f"  (workspace kept for inspection: {ws})")
        raise
    if not cfg.keep:
        shutil.rmtree(ws, ignore_errors=True)
    return run


def summarize(backend: str, runs: list[dict[str, Any]], floor: dict[str, Any]) -> dict[str, Any]:
    first = [r["ingests"][0] for r in runs]
    daily = [i for r in runs for i in r["ingests"][1:]]
    all_ingests = [i for r in runs for i in r["ingests"]]
    daily_wall = stats([i["wall_s"] for i in daily])
    floor_daily = floor["daily_wall_s"]
    ratio = None
    if daily_wall and floor_daily:
        ratio = round(daily_wall["median"] / floor_daily["median"], 3)
    summary: dict[str, Any] = {
        "first_load": {
            "wall_s": stats([i["wall_s"] for i in first]),
            "maxrss_kib": max(i["maxrss_kib"] for i in first),
        },
        "daily": {
            "wall_s": daily_wall,
            "maxrss_kib": max((i["maxrss_kib"] for i in daily), default=None),
        },
        "peak_rss_kib": max(i["maxrss_kib"] for i in all_ingests),
        "floor_daily_wall_s": floor_daily,
        "daily_over_floor": ratio,
        "counts_ok": all(i["counts_ok"] for i in all_ingests),
        "workspace_bytes": max(r.get("workspace_bytes", 0) for r in runs),
        "database_bytes": max((r.get("database_bytes") or 0) for r in runs) or None,
    }
    summary["targets"] = check_targets(backend, summary)
    met = [c["met"] for c in summary["targets"].values()]
    summary["targets_met"] = all(m is not False for m in met)
    return summary


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def markdown(results: list[dict[str, Any]], machine: dict[str, Any], cfg: Config) -> str:
    pk = machine["packages"]
    lines = [
        f"Machine: {machine['cpu']}, {machine['nproc']} CPUs, "
        f"{machine['memory_total_gib']} GiB RAM; Python {machine['python']}, "
        f"polars {pk['polars']}, SQLAlchemy {pk['sqlalchemy']}, psycopg {pk['psycopg']}, "
        f"SQLite {machine['sqlite']}"
        + (f", PostgreSQL {machine['postgresql']}" if machine.get("postgresql") else "")
        + f"; feedledger {pk['feedledger']} ({machine['git_revision']})",
        f"Days: {cfg.days} (1 first load + {cfg.days - 1} daily), repeat: {cfg.repeat}. "
        "Wall and peak RSS are per whole process. Load average (1/5/15 min) at start "
        f"{machine['loadavg_start']}, at end {machine.get('loadavg_end')}.",
        "",
        "| backend | N | first load s | first load RSS MiB | daily median s | daily min s "
        "| daily max s | peak RSS MiB | floor median s | daily / floor | counts | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for res in results:
        s = res["summary"]
        daily = s["daily"]["wall_s"] or {}
        floor = s["floor_daily_wall_s"] or {}
        missed = [
            f"{TARGET_LABELS[name]} {c['value']:.2f} > {c['target']:g}"
            for name, c in s["targets"].items()
            if c["met"] is False
        ]
        verdict = "met" if not missed else "MISSED: " + "; ".join(missed)
        lines.append(
            f"| {res['backend']} | {res['n']:,} | {_fmt(s['first_load']['wall_s']['median'])} "
            f"| {s['first_load']['maxrss_kib'] / 1024:.0f} | {_fmt(daily.get('median'))} "
            f"| {_fmt(daily.get('min'))} | {_fmt(daily.get('max'))} "
            f"| {s['peak_rss_kib'] / 1024:.0f} | {_fmt(floor.get('median'))} "
            f"| {_fmt(s['daily_over_floor'])} | {'ok' if s['counts_ok'] else 'MISMATCH'} "
            f"| {verdict} |"
        )
    lines += [
        "",
        "Targets: SQLite first load <= 10 s, daily median <= 2 s and <= 2x floor, "
        "peak RSS <= 1.5 GiB; PostgreSQL first load <= 15 s, daily median <= 3 s.",
    ]
    return "\n".join(lines)


def write_results(cfg: Config, payload: dict[str, Any]) -> Path:
    return save_results(cfg.results_dir, "ingest", json.dumps(payload, indent=2) + "\n")


@contextlib.contextmanager
def postgres_for(cfg: Config) -> Iterator[Postgres | None]:
    if "postgresql" not in cfg.backends:
        yield None
        return
    pg = Postgres(cfg.postgres_url)
    try:
        yield pg
    finally:
        if not cfg.keep:
            with contextlib.suppress(Exception):
                pg.drop()


def run(cfg: Config) -> int:
    started = datetime.now(UTC)
    machine = machine_info()
    payload: dict[str, Any] = {
        "benchmark": "ingest",
        "started_at": started.isoformat(timespec="seconds"),
        "machine": machine,
        "config": {
            **{k: v for k, v in asdict(cfg).items() if k not in ("feedledger",)},
            "feedledger": str(cfg.feedledger),
            "runs_dir": str(cfg.runs_dir),
            "results_dir": str(cfg.results_dir),
            "postgres_url": cfg.postgres_url if "postgresql" in cfg.backends else None,
            "targets": TARGETS,
        },
        "data": {},
        "floors": {},
        "results": [],
    }
    with postgres_for(cfg) as pg:
        if pg is not None:
            machine["postgresql"] = pg.server_version
        for n in cfg.sizes:
            log(f"== N = {n:,}: generating {cfg.days} day(s)")
            files, gen = generate(cfg, n)
            payload["data"][str(n)] = gen
            log(f"   data ready in {gen['wall_s']:.1f}s ({files[0].path.parent})")
            log(f"== N = {n:,}: floor")
            floor = measure_floor(cfg, files)
            payload["floors"][str(n)] = floor
            for backend in cfg.backends:
                log(f"== N = {n:,}: {backend}")
                runs = [run_backend_once(cfg, backend, files, rep, pg) for rep in range(cfg.repeat)]
                payload["results"].append(
                    {
                        "backend": backend,
                        "n": n,
                        "days": cfg.days,
                        "runs": runs,
                        "summary": summarize(backend, runs, floor),
                    }
                )
    payload["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    payload["harness_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    table = markdown(payload["results"], machine, cfg)
    payload["markdown"] = table
    path = write_results(cfg, payload)
    print(table)
    log(f"results: {path}")
    for res in payload["results"]:
        if not res["summary"]["counts_ok"]:
            log(f"WARNING: {res['backend']} n={res['n']:,}: ingest counts differ from the feed's")
    return 0


def _csv_ints(text: str) -> list[int]:
    try:
        values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text}") from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return values


def _csv_backends(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in BACKENDS]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"backends must be among {', '.join(BACKENDS)}")
    return values


def parse_args(argv: list[str] | None) -> Config:
    p = argparse.ArgumentParser(
        description="Benchmark whole `feedledger ingest` processes on SQLite and PostgreSQL.",
        epilog="See bench/README.md. PostgreSQL admin URL: $FEEDLEDGER_BENCH_POSTGRES_URL "
        f"(default {DEFAULT_POSTGRES_URL}).",
    )
    p.add_argument(
        "--sizes",
        type=_csv_ints,
        default=[100_000, 1_000_000],
        help="comma-separated parcel counts (default: 100000,1000000)",
    )
    p.add_argument(
        "--days", type=int, default=10, help="daily snapshots; day 1 is the first load (10)"
    )
    p.add_argument(
        "--backends",
        type=_csv_backends,
        default=list(BACKENDS),
        help="comma-separated, among sqlite,postgresql (default: both)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="fresh-workspace runs per backend and N, and floor runs per file (1)",
    )
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed")
    p.add_argument(
        "--feedledger",
        type=Path,
        default=Path(sys.executable).parent / "feedledger",
        help="the feedledger executable (default: next to this Python: %(default)s)",
    )
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("FEEDLEDGER_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="admin URL used to create and drop the scratch database",
    )
    p.add_argument(
        "--runs-dir", type=Path, default=RUNS_DIR, help="where workspaces go (%(default)s)"
    )
    p.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help="JSON output (%(default)s)"
    )
    p.add_argument(
        "--keep", action="store_true", help="keep workspaces and the PostgreSQL database"
    )
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per command before it is killed"
    )
    a = p.parse_args(argv)
    if a.days < 1 or a.repeat < 1:
        p.error("--days and --repeat must be >= 1")
    if not os.access(a.feedledger, os.X_OK):
        p.error(f"feedledger executable not found at {a.feedledger} (pip install -e '.[dev]')")
    return Config(
        sizes=a.sizes,
        days=a.days,
        backends=a.backends,
        repeat=a.repeat,
        seed=a.seed,
        feedledger=a.feedledger,
        postgres_url=a.postgres_url,
        runs_dir=a.runs_dir.resolve(),
        results_dir=a.results_dir.resolve(),
        keep=a.keep,
        timeout=a.timeout,
    )


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        return run(cfg)
    except CommandFailed as exc:
        proc = exc.proc
        log(f"\ningest_bench: command failed ({exc}): {' '.join(proc.argv)}")
        if proc.stdout.strip():
            log("--- stdout (last 4000 chars) ---\n" + proc.stdout[-4000:])
        log("--- stderr ---\n" + (proc.stderr.strip() or "(empty)"))
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
