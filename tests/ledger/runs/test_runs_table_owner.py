"""One package owns the `runs` table: ledger/runs/, its writes (`__init__`) and its
reads (`lookup`). No other module (but the schema and migrations that declare it)
imports the table or writes SQL on it."""

from __future__ import annotations

import re
from pathlib import Path

import feedledger

SRC = Path(feedledger.__file__).parent
OWNER = {"ledger/runs/__init__.py", "ledger/runs/lookup.py", "ledger/schema.py"}
TABLE_IMPORT = re.compile(
    r"from feedledger\.ledger\.schema import (?:\([^)]*\bruns\b|[^\n(]*\bruns\b)"
)
TABLE_USE = re.compile(r"\bruns\.c\.|\b(?:insert|update|select|delete)\(runs\b")
RAW_SQL = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+runs\b", re.I)


def test_only_the_runs_package_touches_the_runs_table() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in OWNER or rel.startswith("ledger/migrations/"):
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in (TABLE_IMPORT, TABLE_USE, RAW_SQL):
            if pattern.search(text):
                offenders.append(f"{rel}: {pattern.pattern}")
    assert offenders == []
