"""Crash recovery (Invariants 2 and 4): a fault at any boundary, then a rerun of the
same command, leaves the ledger EQUAL to an uninterrupted run — nothing missing,
nothing doubled.

A sequence of three CSV snapshots (added / changed / deleted keys, plus superseded and
unresolved outcomes via a revision field) is applied once without faults (reference,
one per backend, built once) and again in the test's own workspace with a fault at
payload 2: an in-process `InjectedFailure` (FEEDLEDGER_FAULT=<point>) or a SIGKILLed
subprocess (FEEDLEDGER_FAULT=<point>:kill). The failed command is rerun, payload 3 is
applied, and normalised dumps of the ledger tables and of the CLI views (history,
changes, watermark) are compared.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.faults import ENV as FAULT_ENV
from feedledger.faults import InjectedFailure
from feedledger.ledger import engine as eng
from feedledger.ledger.schema import applications, leases, metadata
from feedledger.ledger.store import Store
from feedledger.model.jsonout import dumps
from feedledger.pipeline import query
from helpers import Cli, backend_store, write_csv

SRC = "parcels"
HEADER = ["id", "zoning", "rev"]
DATES = ["2026-08-01", "2026-08-02", "2026-08-03"]
PAYLOADS: list[list[list[str]]] = [
    # 1: six parcels
    [
        ["1", "R1", "1"],
        ["2", "C2", "1"],
        ["3", "A1", "1"],
        ["4", "R2", "1"],
        ["5", "I1", "1"],
        ["6", "C1", "1"],
    ],
    # 2: 2 and 6 changed, 3 deleted, 7 added, 1/4/5 unchanged
    [
        ["1", "R1", "1"],
        ["2", "C3", "2"],
        ["4", "R2", "1"],
        ["5", "I1", "1"],
        ["6", "C4", "2"],
        ["7", "R1", "1"],
    ],
    # 3: 1 and 7 changed, 3 back (added again), 4 deleted, 8 added, 2 unchanged,
    #    5 older revision (superseded), 6 same revision other content (unresolved)
    [
        ["1", "R9", "3"],
        ["2", "C3", "2"],
        ["3", "A2", "2"],
        ["5", "I0", "0"],
        ["6", "C5", "2"],
        ["7", "R3", "2"],
        ["8", "A1", "1"],
    ],
]
KEYS = [str(i) for i in range(1, 9)]

# Every ledger table a payload's transaction writes (the diff state is derived from
# versions and checked separately by `verify`).
LEDGER_TABLES = tuple(
    name
    for name in ("versions", "watermarks", "applications", "outbox", "outcomes")
    if name in metadata.tables
)
# Columns that legitimately differ between two workspaces holding the same history.
VOLATILE = {
    "recorded_at",
    "run_id",
    "version_id",
    "prev_version_id",
    "first_version_id",
    "txn_seq",
    "outbox_id",
    "created_at",
}

POINTS = ["after_archive", "after_register", "mid_transaction", "before_commit", "after_commit"]
# Points after which a run row exists (a killed process leaves it `running`).
RUN_STARTED = {"mid_transaction", "before_commit", "after_commit"}


# -- helpers ---------------------------------------------------------------------------


def _sort_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _unrun(row: dict[str, Any]) -> dict[str, Any]:
    """An outbox idempotency key names its run; runs differ between workspaces."""
    if row.get("idempotency_key") and row.get("run_id"):
        row["idempotency_key"] = row["idempotency_key"].replace(row["run_id"], "<run>")
    return row


def normalised_dump(ws: Workspace) -> dict[str, list[dict[str, Any]]]:
    """Every row of the ledger tables, volatile columns stripped, in a canonical order."""
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            dump = {}
            for name in LEDGER_TABLES:
                rows = [
                    {k: v for k, v in _unrun(dict(row._mapping)).items() if k not in VOLATILE}
                    for row in conn.execute(select(metadata.tables[name]))
                ]
                dump[name] = sorted(rows, key=_sort_key)
            return dump
    finally:
        store.close()


def _applied_run_ids(ws: Workspace) -> list[str]:
    """Run ids of the payload applications, in publisher order."""
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            return [
                r.run_id
                for r in conn.execute(
                    select(applications.c.run_id)
                    .where(applications.c.retracted_at.is_(None))
                    .order_by(applications.c.published_at)
                )
            ]
    finally:
        store.close()


def _select(ws: Workspace, stmt: Any) -> list[Any]:
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(stmt))
    finally:
        store.close()


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in VOLATILE}


def _histories(ws: Workspace) -> dict[str, list[dict[str, Any]]]:
    """`history SOURCE KEY --json` of every key, through one Context (one store open
    instead of one CLI call per key, to keep the file fast)."""
    with Context(Workspace.load(ws.config_path)) as ctx:
        return {
            k: [
                _strip(v)
                for v in json.loads(
                    dumps(query.history(ctx, SRC, k, include_retracted=False, known_at=None))
                )
            ]
            for k in KEYS
        }


def cli_views(cli: Cli) -> dict[str, Any]:
    """What a user sees: every key's history, each applied payload's changes, the
    watermark (volatile fields stripped)."""
    return {
        "history": _histories(cli.ws),
        "changes": [cli.json("changes", "--run", r) for r in _applied_run_ids(cli.ws)],
        "watermark": cli.json("watermark", SRC),
    }


def _files(tmp_path: Path) -> list[Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return [
        write_csv(tmp_path / f"parcels_{d}.csv", HEADER, rows)
        for d, rows in zip(DATES, PAYLOADS, strict=True)
    ]


def _ingest_args(files: list[Path], i: int) -> list[str]:
    return ["ingest", SRC, str(files[i]), "--published-at", DATES[i]]


def _declare(cli: Cli) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")


def _counts(result: dict[str, Any]) -> dict[str, Any]:
    return {
        k: result.get(k)
        for k in (
            "status",
            "payload_id",
            "published_at",
            "changes",
            "added",
            "changed",
            "deleted",
            "unchanged",
            "superseded",
            "unresolved",
        )
    }


def _verify_ok(cli: Cli) -> None:
    result = cli("verify", SRC, "--json", expect=None)
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"], report


# -- the reference (uninterrupted) run, once per backend --------------------------------

_REFERENCE: dict[str, dict[str, Any]] = {}


@contextmanager
def _second_store(backend: str, tmp: Path) -> Iterator[str]:
    """A store of the same backend for the reference workspace (own PG schema)."""
    with backend_store(backend, tmp, "reference.db") as url:
        yield url


def _build_reference(backend: str, tmp: Path) -> dict[str, Any]:
    with _second_store(backend, tmp) as url:
        ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
        engine = eng.make_engine(ws.store_url)
        eng.upgrade(engine)
        engine.dispose()
        cli = Cli(ws)
        _declare(cli)
        files = _files(tmp / "in")
        stages, results = [], []
        for i in range(len(DATES)):
            results.append(cli.json(*_ingest_args(files, i)))
            stages.append(normalised_dump(ws))
        _verify_ok(cli)
        return {
            "stages": stages,
            "results": results,
            "views": cli_views(cli),
            "runs": cli.json("runs", SRC),
        }


@pytest.fixture
def reference(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    backend = "sqlite" if store_url.startswith("sqlite") else "postgresql"
    if backend not in _REFERENCE:
        _REFERENCE[backend] = _build_reference(backend, tmp_path_factory.mktemp("reference"))
    return _REFERENCE[backend]


def _reference_sanity(ref: dict[str, Any]) -> None:
    """The sequence really exercises adds, changes, deletes and outcomes."""
    r2, r3 = ref["results"][1], ref["results"][2]
    assert (r2["added"], r2["changed"], r2["deleted"]) == (1, 2, 1)
    assert (r3["added"], r3["changed"], r3["deleted"]) == (2, 2, 1)
    assert (r3["superseded"], r3["unresolved"]) == (1, 1)
    assert ref["stages"][2]["outcomes"] and ref["stages"][2]["outbox"]


def _finish_and_compare(
    cli: Cli, files: list[Path], ref: dict[str, Any], point: str, rerun: dict[str, Any] | None
) -> None:
    """Rerun payload 2 (same command; unless `rerun` is its result already), apply
    payload 3, compare with the reference."""
    if rerun is None:
        rerun = cli.json(*_ingest_args(files, 1))
    if point == "after_commit":
        # The payload committed before the crash: the rerun must not apply it again.
        assert rerun["status"] == "already_applied", rerun
        assert rerun["payload_id"] == ref["results"][1]["payload_id"]
    else:
        assert _counts(rerun) == _counts(ref["results"][1])
    third = cli.json(*_ingest_args(files, 2))
    assert _counts(third) == _counts(ref["results"][2])

    dump = normalised_dump(cli.ws)
    for table in LEDGER_TABLES:
        assert dump[table] == ref["stages"][2][table], f"table {table} differs"
    assert cli_views(cli) == ref["views"]
    _verify_ok(cli)

    # Run bookkeeping: every payload counted once, its changes once, no run left running.
    found = cli.json("runs", SRC)
    assert sum(r["payloads"] for r in found) == sum(r["payloads"] for r in ref["runs"]) == 3
    assert sum(r["changes"] for r in found) == sum(r["changes"] for r in ref["runs"])
    assert not [r for r in found if r["status"] == "running"], found


def _prepare(cli: Cli, tmp_path: Path, ref: dict[str, Any]) -> list[Path]:
    _reference_sanity(ref)
    _declare(cli)
    files = _files(tmp_path / "in")
    cli(*_ingest_args(files, 0))
    return files


# -- tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("point", POINTS)
def test_injected_failure_then_rerun_equals_uninterrupted_run(
    cli: Cli,
    tmp_path: Path,
    reference: dict[str, Any],
    point: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = _prepare(cli, tmp_path, reference)

    monkeypatch.setenv(FAULT_ENV, point)
    failed = cli(*_ingest_args(files, 1), expect=None)
    monkeypatch.delenv(FAULT_ENV)
    assert failed.exit_code != 0
    assert isinstance(failed.exception, InjectedFailure), failed.exception

    # Invariant 2: the payload is either wholly applied or not at all.
    stage = 1 if point == "after_commit" else 0
    assert normalised_dump(cli.ws) == reference["stages"][stage]
    _verify_ok(cli)

    _finish_and_compare(cli, files, reference, point, None)
    statuses = [r["status"] for r in cli.json("runs", SRC)]
    if point != "after_commit":  # (a run whose payload committed may say either)
        assert statuses.count("failed") == (1 if point in RUN_STARTED else 0), statuses


@pytest.mark.parametrize("point", POINTS)
def test_killed_process_then_rerun_equals_uninterrupted_run(
    cli: Cli,
    tmp_path: Path,
    reference: dict[str, Any],
    point: str,
) -> None:
    files = _prepare(cli, tmp_path, reference)

    killed = cli.proc(*_ingest_args(files, 1), env={FAULT_ENV: f"{point}:kill"})
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)

    stage = 1 if point == "after_commit" else 0
    assert normalised_dump(cli.ws) == reference["stages"][stage]

    dead_run = None
    if point in RUN_STARTED:
        held = _select(cli.ws, select(leases).where(leases.c.source == SRC))
        assert len(held) == 1 and held[0].holder, "the killed run should still hold the lease"
        dead_run = held[0].run_id

    rerun = None
    if point == "mid_transaction":
        # The very next run (another process, started at once) takes the dead process's
        # lease over: it neither waits for the lease to expire nor fails with "lease
        # held" (exit 7). The timeout only bounds a hang; nothing asserts on time.
        proc = cli.proc(*_ingest_args(files, 1), "--json", timeout=60)
        assert proc.returncode == 0, proc.stderr
        rerun = json.loads(proc.stdout)
        assert rerun["run_id"] != dead_run
        after = _select(cli.ws, select(leases).where(leases.c.source == SRC))
        assert after[0].holder is None, "the rerun should release the lease it took over"

    _finish_and_compare(cli, files, reference, point, rerun)

    # The dead process's run is marked abandoned when its lease is taken over.
    found = cli.json("runs", SRC)
    abandoned = [r["run_id"] for r in found if r["status"] == "abandoned"]
    assert abandoned == ([dead_run] if dead_run else []), found
