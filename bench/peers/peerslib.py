"""The three tools as whole processes, for ``run.py`` and ``test_outage.py``.

Runs under OUR virtual environment and stays small (no polars, no DuckDB here): every
tool is a child process measured with ``run_measured`` from ``bench/ingest_bench.py``
(wall time from spawn to exit, peak RSS from ``os.wait4``). The peers' scripts run under
the PEERS environment ``bench/.peers`` (``make bench-peers`` creates it), never ours:

* feedledger: ``feedledger init`` / ``source add`` once, then ``feedledger ingest`` per day
  (SQLite store, or a scratch PostgreSQL database);
* dlt: ``bench/peers/dlt_day.py`` per day (Arrow table, ``merge`` + ``scd2``, DuckDB);
* dbt: ``bench/peers/dbt_day.py --init`` once, then per day (CSV into DuckDB,
  ``dbt snapshot`` with ``strategy: check``, ``check_cols: all``,
  ``hard_deletes: new_record``);
* floor: ``bench/floor.py`` per day (read + hash, our venv).

``histories.py`` (PEERS environment, it needs DuckDB) reads the three histories back.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent
BENCH_DIR = PEERS_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import ingest_bench as ib  # noqa: E402

PEERS_VENV = BENCH_DIR / ".peers"
PEERS_PY = PEERS_VENV / "bin" / "python"
DLT_DAY = PEERS_DIR / "dlt_day.py"
DBT_DAY = PEERS_DIR / "dbt_day.py"
HISTORIES = PEERS_DIR / "histories.py"
FEEDLEDGER = Path(sys.executable).parent / "feedledger"
RUNS_DIR = BENCH_DIR / ".work" / "runs"
SOURCE = "parcels"
DEFAULT_SEED = ib.DEFAULT_SEED
PEER_DISTS = ("dlt", "dbt-core", "dbt-duckdb", "duckdb", "pyarrow")

# Nothing but the package registry is reachable: the peers' telemetry stays off. Each
# peer script sets these again itself; the harness sets them for every child.
OFFLINE_ENV = {
    "RUNTIME__DLTHUB_TELEMETRY": "false",  # dlt: [runtime] dlthub_telemetry = false
    "DO_NOT_TRACK": "1",  # dbt (and others honouring the Console Do Not Track convention)
    "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
}

Proc = ib.Proc
CommandFailed = ib.CommandFailed
DayFile = ib.DayFile
log = ib.log


def offline_env() -> None:
    os.environ.update(OFFLINE_ENV)


def require_peers() -> None:
    if not os.access(PEERS_PY, os.X_OK):
        raise SystemExit(
            f"peers: no peers environment at {PEERS_VENV}; create it with `make bench-peers` "
            "(or: python3 -m venv bench/.peers && bench/.peers/bin/pip install "
            "'dlt[duckdb]' pyarrow 'dbt-duckdb' 'dbt-core<1.12')"
        )


def peer_versions(timeout: float = 120) -> dict[str, str | None]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        f"for d in {list(PEER_DISTS)!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: out[d] = None\n"
        "out['python'] = sys.version.split()[0]\n"
        "print(json.dumps(out))\n"
    )
    proc = ib.run_measured([PEERS_PY, "-c", code], BENCH_DIR, timeout)
    return dict(json.loads(proc.stdout))


def series(n: int, days: int, seed: int = DEFAULT_SEED, timeout: float = 1800) -> list[DayFile]:
    """The generated feed (cached under bench/.work/ by gen_parcels.py), in a child."""
    argv = [sys.executable, ib.GEN_SCRIPT, "--n", n, "--days", days, "--seed", seed, "--json"]
    proc = ib.run_measured(argv, BENCH_DIR, timeout)
    out = ib.parse_json_output(proc.stdout)
    return [DayFile(**{**d, "path": Path(d["path"])}) for d in out["days"]]


def series_dir(files: list[DayFile]) -> Path:
    return files[0].path.parent


# --- the tools --------------------------------------------------------------------------


@dataclass
class Tool:
    """One pipeline in its own workspace: ``setup`` (not measured), then ``day`` per file."""

    name: str
    timeout: float = 1800.0
    ws: Path = field(default=Path("."), init=False)

    def setup(self, ws: Path) -> None:
        self.ws = ws
        ws.mkdir(parents=True, exist_ok=True)

    def argv(self, f: DayFile) -> list[Any]:
        raise NotImplementedError

    def day(self, f: DayFile) -> tuple[Proc, dict[str, Any]]:
        proc = ib.run_measured(self.argv(f), self.ws, self.timeout)
        try:
            out = ib.parse_json_output(proc.stdout)
        except ValueError as exc:
            raise CommandFailed(proc, f"printed no JSON object ({exc})") from exc
        self.check(f, out, proc)
        return proc, out

    def check(self, f: DayFile, out: dict[str, Any], proc: Proc) -> None:
        rows = out.get("rows")
        if rows is not None and rows != f.rows:
            raise CommandFailed(proc, f"{self.name}: read {rows} rows, the file has {f.rows}")

    def teardown(self) -> None:
        pass


@dataclass
class Feedledger(Tool):
    backend: str = "sqlite"
    pg: ib.Postgres | None = None
    # a baseline tree's src/ run through the same venv (run.py --base-src); None: this one
    base_src: Path | None = None

    @property
    def exe(self) -> list[Any]:
        if self.base_src is None:
            return [FEEDLEDGER]
        return ["env", f"PYTHONPATH={self.base_src.resolve()}", FEEDLEDGER]

    def setup(self, ws: Path) -> None:
        super().setup(ws)
        init: list[Any] = [*self.exe, "init"]
        if self.backend == "postgresql":
            assert self.pg is not None
            self.pg.recreate()
            init += ["--store", self.pg.store_url]
        ib.run_measured(init, ws, self.timeout)
        add = [*self.exe, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv"]
        ib.run_measured([*add, "--kind", "snapshot"], ws, self.timeout)

    def argv(self, f: DayFile) -> list[Any]:
        return [*self.exe, "ingest", SOURCE, f.path, "--published-at", f.published_at, "--json"]

    def check(self, f: DayFile, out: dict[str, Any], proc: Proc) -> None:
        counts = ib.extract_counts(out)
        expected = {"added": f.added, "changed": f.changed, "deleted": f.deleted}
        if counts != expected:
            raise CommandFailed(proc, f"feedledger counted {counts}, the feed says {expected}")

    @property
    def store(self) -> Path:
        return self.ws / ".feedledger" / "ledger.db"

    def run(self, *args: Any) -> Proc:
        return ib.run_measured([*self.exe, *args], self.ws, self.timeout)


@dataclass
class Dlt(Tool):
    def argv(self, f: DayFile) -> list[Any]:
        return [PEERS_PY, DLT_DAY, "--workspace", self.ws, f.path]

    @property
    def store(self) -> Path:
        return self.ws / "dlt.duckdb"


@dataclass
class Dbt(Tool):
    def setup(self, ws: Path) -> None:
        super().setup(ws)
        ib.run_measured([PEERS_PY, DBT_DAY, "--workspace", ws, "--init"], ws, self.timeout)

    def argv(self, f: DayFile) -> list[Any]:
        return [PEERS_PY, DBT_DAY, "--workspace", self.ws, f.path]

    @property
    def store(self) -> Path:
        return self.ws / "dbt.duckdb"


@dataclass
class Floor(Tool):
    def argv(self, f: DayFile) -> list[Any]:
        return [sys.executable, ib.FLOOR_SCRIPT, f.path]


def histories(*args: Any, timeout: float = 1800) -> dict[str, Any]:
    """Run ``histories.py`` under the peers' Python; its JSON answer."""
    proc = ib.run_measured([PEERS_PY, HISTORIES, *args], BENCH_DIR, timeout)
    out = ib.parse_json_output(proc.stdout)
    out["_proc"] = proc.summary()
    return out


def store_args(fl: Feedledger | None, dlt: Dlt | None, dbt: Dbt | None) -> list[Any]:
    args: list[Any] = []
    if fl is not None:
        args += ["--feedledger", fl.store]
    if dlt is not None:
        args += ["--dlt", dlt.store]
    if dbt is not None:
        args += ["--dbt", dbt.store]
    return args


def _days_arg(days: list[int]) -> str:
    return ",".join(str(d) for d in days)


def mismatches(compare: dict[str, Any], pair: str) -> int:
    return int(compare["pairs"][pair]["mismatches"])


# --- the cross-check: same series, all three daily ---------------------------------------


def crosscheck(
    files: list[DayFile], root: Path, timeout: float = 1800, keep: bool = False
) -> dict[str, Any]:
    """All three tools over every day of ``files``; their histories compared per entity."""
    ws = Path(tempfile.mkdtemp(prefix=f"peers-crosscheck-n{files[0].rows}-", dir=root))
    fl, dlt, dbt = Feedledger("feedledger", timeout), Dlt("dlt", timeout), Dbt("dbt", timeout)
    try:
        for tool in (fl, dlt, dbt):
            tool.setup(ws / tool.name)
        for f in files:
            for tool in (fl, dlt, dbt):
                tool.day(f)
        days = [f.day for f in files]
        result = histories(
            "compare",
            "--series",
            series_dir(files),
            "--days",
            _days_arg(days),
            *store_args(fl, dlt, dbt),
            timeout=timeout,
        )
    except BaseException:
        log(f"  (cross-check workspace kept: {ws})")
        raise
    if not keep:
        shutil.rmtree(ws, ignore_errors=True)
    result["n"] = files[0].rows
    result["days"] = len(files)
    return result


def crosscheck_ok(result: dict[str, Any]) -> bool:
    tools = [t for t in ("truth", "feedledger", "dlt", "dbt") if t in result["tools"]]
    pairs = [f"{a}~{b}" for i, a in enumerate(tools) for b in tools[i + 1 :]]
    return (
        all(mismatches(result, p) == 0 for p in pairs)
        and result.get("feedledger_valid_from_differs_from_publisher_date", 0) == 0
    )


def crosscheck_markdown(result: dict[str, Any]) -> str:
    tools = result["tools"]
    lines = [
        "| history | rows stored | entities | versions (normalised) | of which delete markers |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in tools.items():
        raw = "-" if t["raw_rows"] is None else f"{t['raw_rows']:,}"
        lines.append(
            f"| {name} | {raw} | {t['entities']:,} | {t['versions']:,} | {t['delete_markers']:,} |"
        )
    lines += ["", "| pair | entities | agree | mismatches |", "|---|---:|---:|---:|"]
    for pair, c in result["pairs"].items():
        lines.append(f"| {pair} | {c['entities']:,} | {c['agree']:,} | {c['mismatches']:,} |")
    return "\n".join(lines)


# --- the outage: days 4-6 not run, everything caught up on day 7 --------------------------

OUTAGE_LIVE = (1, 2, 3)
OUTAGE_MISSED = (4, 5, 6)
OUTAGE_CATCHUP = 7


def outage(
    files: list[DayFile], root: Path, timeout: float = 1800, keep: bool = False
) -> dict[str, Any]:
    """Days 1-3 daily; days 4-6 not run; on day 7 what each tool can do.

    feedledger: the fetcher kept archiving (``archive add`` of days 4..7 with their
    publisher dates), and day 7's run is ``feedledger backfill --from day4 --to day7``:
    every archived payload applied in publisher order, each with its own valid_from.
    dlt and dbt: the only input left is day 7's file; it is loaded as a normal day (a
    naive catch-up), stamped with the load time.
    """
    if len(files) < OUTAGE_CATCHUP:
        raise ValueError(f"the outage needs {OUTAGE_CATCHUP} days, got {len(files)}")
    by_day = {f.day: f for f in files}
    ws = Path(tempfile.mkdtemp(prefix=f"peers-outage-n{files[0].rows}-", dir=root))
    fl, dlt, dbt = Feedledger("feedledger", timeout), Dlt("dlt", timeout), Dbt("dbt", timeout)
    commands: list[str] = []
    try:
        for tool in (fl, dlt, dbt):
            tool.setup(ws / tool.name)
        for d in OUTAGE_LIVE:
            for tool in (fl, dlt, dbt):
                tool.day(by_day[d])
        # the outage: nothing ran on days 4-6; the fetcher archived their payloads
        for d in (*OUTAGE_MISSED, OUTAGE_CATCHUP):
            f = by_day[d]
            fl.run("archive", "add", SOURCE, f.path, "--published-at", f.published_at, "--json")
            commands.append(
                f"feedledger archive add {SOURCE} {f.path.name} --published-at {f.published_at}"
            )
        first, last = by_day[OUTAGE_MISSED[0]], by_day[OUTAGE_CATCHUP]
        backfill = fl.run(
            "backfill", SOURCE, "--from", first.published_at, "--to", last.published_at, "--json"
        )
        commands.append(
            f"feedledger backfill {SOURCE} --from {first.published_at} --to {last.published_at}"
        )
        # dlt and dbt: a naive catch-up with what is there on day 7
        catchup = {"feedledger": backfill.summary()}
        catchup["dlt"] = dlt.day(last)[0].summary()
        catchup["dbt"] = dbt.day(last)[0].summary()
        all_days = _days_arg(sorted(by_day)[:OUTAGE_CATCHUP])
        seen = _days_arg([*OUTAGE_LIVE, OUTAGE_CATCHUP])
        common = ["--series", series_dir(files), "--days", all_days, "--expect-days", seen]
        compare = histories("compare", *common, *store_args(fl, dlt, dbt), timeout=timeout)
        picked = histories(
            "pick",
            "--series",
            series_dir(files),
            "--days",
            all_days,
            "--window",
            _days_arg(list(OUTAGE_MISSED)),
            "--require",
            "4,5",
            timeout=timeout,
        )
        key = picked["key"]
        if key is None:
            raise RuntimeError("outage: no parcel changed on day 4 or 5 in this series")
        show = histories("show", key, *common, *store_args(fl, dlt, dbt), timeout=timeout)
        cli = fl.run("history", SOURCE, key, "--json")
        fl_history = json.loads(cli.stdout)
    except BaseException:
        log(f"  (outage workspace kept: {ws})")
        raise
    if not keep:
        shutil.rmtree(ws, ignore_errors=True)
    return {
        "n": files[0].rows,
        "live_days": list(OUTAGE_LIVE),
        "missed_days": list(OUTAGE_MISSED),
        "catchup_day": OUTAGE_CATCHUP,
        "feedledger_commands": commands,
        "backfill": ib.parse_json_output(backfill.stdout),
        "catchup": catchup,
        "compare": compare,
        "key": key,
        "changes_in_window": picked["changes_in_window"],
        "show": show,
        "feedledger_history_cli": fl_history,
        "markdown": show["markdown"],
    }


def outage_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The numbers the README quotes: entities whose history each tool got right."""
    c = result["compare"]
    out: dict[str, Any] = {"entities": c["tools"]["truth"]["entities"]}
    for tool in ("feedledger", "dlt", "dbt"):
        vs_truth = c["pairs"][f"truth~{tool}"]
        vs_seen = c["pairs"][f"expected~{tool}"]
        out[tool] = {
            "versions": c["tools"][tool]["versions"],
            "entities_matching_publisher_history": vs_truth["agree"],
            "entities_differing_from_publisher_history": vs_truth["mismatches"],
            "entities_differing_from_days_1_2_3_7": vs_seen["mismatches"],
        }
    out["stamps"] = {t: c["stamps"][t] for t in ("truth", "feedledger", "dlt", "dbt")}
    out["catchup_wall_s"] = {t: p["wall_s"] for t, p in result["catchup"].items()}
    out["truth_versions"] = c["tools"]["truth"]["versions"]
    out["days_1_2_3_7_versions"] = c["tools"]["expected"]["versions"]
    out["feedledger_valid_from_differs_from_publisher_date"] = c[
        "feedledger_valid_from_differs_from_publisher_date"
    ]
    return out
