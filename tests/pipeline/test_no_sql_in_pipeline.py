"""The pipeline modules of runs on one source hold no SQL and open no
transaction or connection -- the ledger's storage functions do."""

from __future__ import annotations

import re
from pathlib import Path

import feedledger

PIPELINE = Path(feedledger.__file__).parent / "pipeline"
MODULES = [
    "intake/apply",
    "catchup/applying",
    "catchup/assess",
    "catchup/backfill",
    "doctor/data_checks",
    "doctor/examine",
    "doctor/findings",
    "doctor/store_checks",
    "health",
    "intake/ingest",
    "intake/live_apply",
    "manual",
    "query",
    "retract",
    "review",
    "catchup/replay",
    "catchup/report",
    "scheduling",
    "verify",
]
LEAKS = {
    "imports SQLAlchemy": re.compile(r"^\s*(?:from|import) sqlalchemy\b", re.M),
    "imports a table": re.compile(r"^\s*from feedledger\.ledger\.schema import", re.M),
    "opens a transaction": re.compile(r"\.begin\(\)"),
    "opens a connection": re.compile(r"engine\.connect\(\)"),
    "writes SQL": re.compile(r"\b(?:SELECT|UPDATE|INSERT INTO|DELETE FROM)\b"),
}


def test_pipeline_runs_leave_sql_and_transactions_to_storage() -> None:
    found = [
        f"{name}.py {problem}"
        for name in MODULES
        for problem, pattern in LEAKS.items()
        if pattern.search((PIPELINE / f"{name}.py").read_text(encoding="utf-8"))
    ]
    assert found == []
