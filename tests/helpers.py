"""Helpers shared by the tests (imported as `from helpers import ...`): the backends,
the PostgreSQL schema URL, the in-process / subprocess CLI runner, file writers.
Fixtures live in conftest.py, which builds on these."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import pg_schemas
from feedledger.archive.sidecar import new_ref
from feedledger.config import Workspace
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig

# the `make_source` fixture (conftest.py): (name="larimer", key="parcel_id", **options)
MakeSource = Callable[..., SourceConfig]

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"
PG_SKIP = (
    f"PostgreSQL backend not tested: set {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
)
BACKENDS = ["sqlite", "postgresql"]


def pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


# -- a new store at the head schema, cheaply ---------------------------------------------
#
# Nearly every test starts from an empty store at the head schema. Running Alembic for
# each one (load the scripts, reflect, ~45 DDL operations) cost 0.5-1 s per test, a
# third of the suite. `migrate(url)` gives the same schema for a fraction of that:
# Alembic runs for real once per process and backend, then SQLite stores are copies of
# that file and PostgreSQL schemas get the very statements it sent, replayed on one
# connection (the first replay is compared with the real one's catalog) -- or, cheaper
# still, are a former test's schema cleaned back to that state (tests/pg_schemas.py:
# its first one compared with the real one's catalog too). The migrations
# themselves stay tested as such: ledger/test_schema_matches_migrations.py,
# ledger/test_bitemporal.py, `init`, `db upgrade`.

_SQLITE_TEMPLATE: list[Path] = []
_PG_SCRIPT: list[tuple[str, Any, bool]] = []
_PG_CATALOG: list[list[tuple[Any, ...]]] = []
_TEMPLATE_DIR: list[tempfile.TemporaryDirectory[str]] = []


def migrate(url: str) -> None:
    """Brings the new, empty store at `url` (SQLite file or PostgreSQL schema on the
    search_path) to the head schema: the same result as `engine.upgrade`, cheaper."""
    from sqlalchemy.engine import make_url

    from feedledger.ledger import engine as eng

    parsed = make_url(eng.normalise_url(url))
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_sqlite_template(), path)
        return
    engine = eng.make_engine(url)
    try:
        if not _PG_SCRIPT:
            _record_pg(engine)
            return
        raw = engine.raw_connection()
        taken = False
        try:
            schema = _search_path(raw)
            # a recycled head schema renamed into place (pg_schemas.py), else the replay
            taken = pg_schemas.take(raw, schema)
        finally:
            if taken:
                raw.close()
        if taken:
            pg_schemas.check_against_alembic(url)
            return
        try:
            cur = raw.cursor()
            for statement, params, many in _PG_SCRIPT:
                if many:
                    cur.executemany(statement, params)
                else:
                    cur.execute(statement, params)
            cur.close()
            raw.commit()
            if len(_PG_CATALOG) == 1:  # once per process: the replay gave the same schema
                with engine.connect() as conn:
                    replayed = _pg_catalog(conn)
                assert replayed == _PG_CATALOG[0], "replayed migrations differ from Alembic's"
                _PG_CATALOG.append(replayed)
                pg_schemas.record_pristine(raw, schema)
            pg_schemas.note(raw, schema)
        finally:
            raw.close()
    finally:
        engine.dispose()


def _search_path(raw: Any) -> str:
    cur = raw.cursor()
    cur.execute("SHOW search_path")
    schema = str(cur.fetchone()[0]).strip('"')
    cur.close()
    raw.rollback()
    return schema


def _sqlite_template() -> Path:
    if not _SQLITE_TEMPLATE:
        from feedledger.ledger import engine as eng

        _TEMPLATE_DIR.append(tempfile.TemporaryDirectory(prefix="fl-template-"))
        path = Path(_TEMPLATE_DIR[0].name) / "ledger.db"
        engine = eng.make_engine(f"sqlite:///{path}")
        eng.upgrade(engine)
        engine.dispose()
        # the WAL is folded in when the last connection closes: the file is the store
        assert not path.with_name("ledger.db-wal").exists()
        _SQLITE_TEMPLATE.append(path)
    return _SQLITE_TEMPLATE[0]


def _record_pg(engine: Any) -> None:
    from sqlalchemy import event

    from feedledger.ledger import engine as eng

    script: list[tuple[str, Any, bool]] = []

    def record(_conn: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        script.append((statement, params, many))

    event.listen(engine, "after_cursor_execute", record)
    try:
        eng.upgrade(engine)
    finally:
        event.remove(engine, "after_cursor_execute", record)
    with engine.connect() as conn:
        _PG_CATALOG.append(_pg_catalog(conn))
    _PG_SCRIPT.extend(script)


def _pg_catalog(conn: Any) -> list[tuple[Any, ...]]:
    """The current schema's tables, columns, constraints, indexes, views and rows of
    alembic_version, with the schema's own name left out."""
    from sqlalchemy import text

    schema = conn.execute(text("SELECT current_schema()")).scalar_one()
    queries = [
        "SELECT table_name, column_name, data_type, is_nullable, column_default,"
        " ordinal_position FROM information_schema.columns WHERE table_schema = :s",
        # (not-null checks are named after OIDs; is_nullable above covers them)
        "SELECT table_name, constraint_name, constraint_type"
        " FROM information_schema.table_constraints WHERE table_schema = :s"
        " AND constraint_name !~ '^[0-9_]+_not_null$'",
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = :s",
        "SELECT table_name, view_definition FROM information_schema.views WHERE table_schema = :s",
        "SELECT version_num FROM alembic_version",
    ]
    rows: list[tuple[Any, ...]] = []
    for query in queries:
        got = conn.execute(text(query), {"s": schema}).all()
        rows.extend(tuple(str(v).replace(f"{schema}.", "") for v in r) for r in got)
    return sorted(rows)


class Cli:
    """Runs `feedledger` in-process (fast) or as a real subprocess (crash tests)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.runner = CliRunner()

    def __call__(self, *args: str, expect: int | None = 0) -> Any:
        from feedledger.cli.main import app

        result = self.runner.invoke(app, ["--config", str(self.ws.config_path), *args])
        if expect is not None and result.exit_code != expect:
            raise AssertionError(
                f"feedledger {' '.join(args)} exited {result.exit_code}, expected {expect}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}\n{result.exception!r}"
            )
        return result

    def json(self, *args: str) -> Any:
        import json

        return json.loads(self(*args, "--json").stdout)

    def proc(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "feedledger", "--config", str(self.ws.config_path), *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )


def payload_ref(
    source: str, data: bytes, published_at: int, fetched_at: int, original_name: str | None = None
) -> PayloadRef:
    """The PayloadRef of `data` as an archive's `put` files it (`archive.sidecar.new_ref`)."""
    return new_ref(
        source,
        data,
        published_at=published_at,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=None,
        sha256=None,
    )


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


@contextmanager
def backend_store(backend: str, tmp: Path, name: str = "ledger.db") -> Iterator[str]:
    """A fresh, empty store URL of `backend`: a SQLite file `tmp/name`, or a PostgreSQL
    schema of its own (dropped afterwards) on FEEDLEDGER_TEST_POSTGRES_URL -- the test
    skips with PG_SKIP where that is unset."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp / name}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        import pytest

        pytest.skip(PG_SKIP)
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    pg_schemas.register_cleanup(base)
    try:
        yield pg_schema_url(base, schema)
    finally:
        # a schema whose data alone changed is cleaned for the next test, else dropped
        with psycopg.connect(base) as conn:
            if not pg_schemas.release(conn, schema):
                pg_schemas.COUNTS["dropped"] += 1
                conn.autocommit = True
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def old_cell(value: Any) -> str:
    """A value as the former row-by-row CSV export wrote it (the reference of the compact store's
    snapshot tests): null as empty, a string as itself, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)
    import json

    return json.dumps(value, ensure_ascii=False)


def old_csv(texts: list[str], order: list[str]) -> bytes:
    """The former CSV writer (one json.loads and one csv row per entity), kept in the
    tests as the reference the fast exports must equal byte for byte."""
    import csv
    import io
    import json

    from feedledger.formats.canonical import RawNumber
    from feedledger.model.errors import ConfigError
    from feedledger.pipeline.exports.order import ordered

    buf = io.StringIO()
    writer: Any = None
    columns: list[str] = []
    for attrs in texts:
        record = json.loads(attrs, parse_float=RawNumber, parse_int=RawNumber)
        if writer is None:
            columns = ordered(list(record), order)
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerow(columns)
        elif set(record) - set(columns):
            raise ConfigError("entities have different fields; use --format jsonl")
        writer.writerow([old_cell(record.get(col)) for col in columns])
    return buf.getvalue().encode("utf-8")


def refused_or(make: Callable[[], Any]) -> Any:
    """`make()`, or ("refused", message) when it raises ConfigError."""
    from feedledger.model.errors import ConfigError

    try:
        return make()
    except ConfigError as exc:
        return ("refused", str(exc))


def top_patterns(text: str) -> list[str]:
    """The top-level codebook patterns a canonical object text holds (`{"a":"`,
    `","b":`, ... and `"}` after a string last), a number's as a non-string's
    (`,"n":`): what the codebook tests build their books from."""
    import json

    from feedledger.formats.canonical import RawNumber

    record = json.loads(text, parse_float=RawNumber, parse_int=RawNumber)
    out: list[str] = []
    prev_str = False
    for i, (name, value) in enumerate(record.items()):
        lead = "{" if i == 0 else ('",' if prev_str else ",")
        prev_str = isinstance(value, str) and not isinstance(value, RawNumber)
        out.append(lead + json.dumps(name, ensure_ascii=False) + ":" + ('"' if prev_str else ""))
    if prev_str:
        out.append('"}')
    return out


def start_serve(
    ws: Workspace, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """`feedledger serve --port 0 ARGS` over `ws` in a process of its own (`env` added to
    this one's), once it has printed its URL: (the process, the URL)."""
    import re

    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(ws.config_path), "serve",
         "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"no URL announced: {line!r} {proc.communicate()}")
    return proc, f"http://127.0.0.1:{found.group(1)}"
