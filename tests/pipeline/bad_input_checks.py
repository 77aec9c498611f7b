"""What bad input must leave as it was, and how its error reads: the ledger's rows, the
payload's bytes in the archive, the one message of a failed command. Shared by the
bad-input and hostile-payload tests.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import select
from typer.testing import Result

from feedledger.config import Workspace
from feedledger.ledger.schema import metadata
from feedledger.ledger.store import Store

LEDGER_TABLES = ("versions", "watermarks", "applications", "outbox", "outcomes")


def ledger_dump(ws: Workspace) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the ledger tables, ordered by all columns."""
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            dump = {}
            for name in LEDGER_TABLES:
                table = metadata.tables[name]
                stmt = select(table).order_by(*table.c)
                dump[name] = [tuple(row) for row in conn.execute(stmt)]
            return dump
    finally:
        store.close()


def is_archived(ws: Workspace, data: bytes) -> bool:
    """The bytes are kept as an object file named by their sha256 under objects/."""
    sha = hashlib.sha256(data).hexdigest()
    objects = ws.archive_root / "objects"
    return any(p.is_file() and p.read_bytes() == data for p in objects.rglob(sha))


def one_message(result: Result) -> str:
    """The command failed with exactly one clear line on stderr, nothing on stdout."""
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line, got: {result.stderr!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout.strip() == "", result.stdout
    return lines[0]
