"""A workspace's files and its store's schema through the public API: creating one
(`feedledger init`), loading its feedledger.toml (`--config`), upgrading or reading the
schema revision (`db upgrade`, `db current`), checking a source's fetch folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedledger.config import Workspace as Workspace  # the configuration type, public here
from feedledger.model.source import SourceConfig
from feedledger.timing import stage


@dataclass(frozen=True)
class Created:
    """A new workspace: its feedledger.toml, store URL (password redacted), archive and
    schema revision."""

    config: Path
    store: str
    archive: str
    schema: str

    def to_json(self) -> dict[str, Any]:
        return {
            "config": str(self.config),
            "store": self.store,
            "archive": self.archive,
            "schema": self.schema,
        }


@dataclass(frozen=True)
class SchemaChange:
    store: str  # redacted
    before: str | None  # None: the store was empty
    after: str

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class SchemaState:
    store: str  # redacted
    current: str | None  # None: the store is empty
    head: str  # the revision this version needs

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "current": self.current, "head": self.head}


def load_workspace(config: str | os.PathLike[str] | None = None) -> Workspace:
    """The workspace of a feedledger.toml (None: ./feedledger.toml or $FEEDLEDGER_CONFIG)."""
    with stage("config"):
        return Workspace.load(Path(config) if config is not None else None)


def create(
    path: str | os.PathLike[str] = ".",
    *,
    store: str | None = None,
    archive: str | None = None,
    archive_endpoint_url: str | None = None,
) -> tuple[Workspace, Created]:
    """feedledger.toml, the store (schema by Alembic) and the archive folder (or check
    that the bucket answers); nothing is left behind when one of them fails."""
    from feedledger.archive import open_archive  # lazy: zstandard, s3fs
    from feedledger.ledger import engine as eng  # lazy: SQLAlchemy

    root = Path(path).resolve()
    if store:
        probe = eng.make_engine(store)
        eng.check_reachable(probe, store)
        probe.dispose()
    ws = Workspace.create(
        root, store_url=store, archive=archive, archive_endpoint_url=archive_endpoint_url
    )
    try:
        # a folder is created; a bucket must exist and answer with these credentials
        open_archive(ws.archive_location, endpoint_url=ws.archive_endpoint_url).prepare()
        engine = eng.make_engine(ws.store_url)
        eng.check_reachable(engine, ws.store_url)
        _before, after = eng.upgrade(engine)
        engine.dispose()
    except BaseException:  # any failure, a refused statement or Ctrl-C included
        ws.config_path.unlink(missing_ok=True)
        raise
    return ws, Created(ws.config_path, eng.redact(ws.store_url), ws.archive_location, after)


def upgrade_schema(
    config: str | os.PathLike[str] | None = None, *, wait_s: float = 0.0, force: bool = False
) -> SchemaChange:
    """Create or upgrade the store's schema to this version's head revision. Refused
    (UpgradeBlockedError, nothing changed) while feedledger processes of a schema older
    than the new schema's floor hold live leases, after waiting up to `wait_s` seconds
    for them to let go; `force`: upgrade anyway (docs/upgrading.md)."""
    from feedledger.ledger import engine as eng  # lazy: SQLAlchemy

    ws = load_workspace(config)
    engine = eng.make_engine(ws.store_url)
    try:
        eng.check_reachable(engine, ws.store_url)
        before, after = eng.upgrade(engine, wait_s=wait_s, force=force)
    finally:
        engine.dispose()
    return SchemaChange(eng.redact(ws.store_url), before, after)


def schema_state(config: str | os.PathLike[str] | None = None) -> SchemaState:
    """The store's schema revision and the one this version needs (nothing created)."""
    from feedledger.ledger import engine as eng  # lazy: SQLAlchemy

    ws = load_workspace(config)
    engine = eng.make_engine(ws.store_url, create=False)
    eng.check_reachable(engine, ws.store_url)
    current = eng.current_revision(engine)
    engine.dispose()
    return SchemaState(eng.redact(ws.store_url), current, eng.head_revision())


def missing_fetch_folder(src: SourceConfig) -> Path | None:
    """A local fetch location that does not exist (yet): the folder to warn about (it may
    be a mount that is not there yet, so not an error); None for URLs and present ones."""
    location = (src.fetch or "").removeprefix("file://")
    if not location or "://" in location:
        return None
    from feedledger.sources.templates import is_template  # lazy: httpx, the fetchers

    folder = Path(location).expanduser()
    if is_template(location):
        # the folder above the first {date} field (which may name a file or a folder)
        folder = Path(location.split("{date", 1)[0] + "_").expanduser().parent
    return None if folder.exists() else folder
