"""Random payload sequences (snapshot and changes) and the naive model of the history they
make, with a fresh workspace per example: shared by the history and backfill property
tests.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from feedledger.config import Workspace, make_source
from helpers import PG_ENV, PG_SKIP, migrate, pg_schema_url

KEYS = ["a", "b", "ab", "c", "d"]
Payload = dict[str, str]  # key -> value ("" allowed)


@contextmanager
def fresh_workspace(backend: str) -> Iterator[Workspace]:
    with tempfile.TemporaryDirectory() as tmp:
        schema = None
        if backend == "sqlite":
            url = f"sqlite:///{tmp}/l.db"
        else:
            base = os.environ.get(PG_ENV)
            if not base:
                pytest.skip(PG_SKIP)
            import psycopg

            schema = f"p_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            url = pg_schema_url(base, schema)
        try:
            ws = Workspace.create(Path(tmp) / "ws", store_url=url, archive=None)
            migrate(ws.store_url)
            ws.add_source(make_source("s", key=("id",), mass_delete_threshold=1.0))
            yield ws
        finally:
            if schema:
                import psycopg

                with psycopg.connect(os.environ[PG_ENV], autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def csv_bytes(p: Payload) -> bytes:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "v"])
    for k in sorted(p):
        w.writerow([k, p[k]])
    return buf.getvalue().encode()


def expected_history(seq: list[Payload]) -> dict[str, list[tuple[int, str | None]]]:
    """Naive model: per key, (payload index, value or None for deleted) at each change."""
    hist: dict[str, list[tuple[int, str | None]]] = {}
    state: dict[str, str] = {}
    for i, p in enumerate(seq):
        for k in set(state) | set(p):
            before, after = state.get(k), p.get(k)
            if before != after:
                hist.setdefault(k, []).append((i, after))
        state = dict(p)
    return hist


def day(i: int) -> str:
    return f"2026-08-{i + 1:02d}"
