"""`feedledger.open` / `feedledger.init` and the Ledger: one workspace (its store,
archive and state cache: one `feedledger.context.Context`), its sources, runs and
destinations."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.ledger_ops import LedgerOperations
from feedledger.api.reports import Retraction, SourceHealth
from feedledger.api.results import Change, Run
from feedledger.api.times import instant_us
from feedledger.config import (
    CONFIG_NAME,
    DEFAULT_ARCHIVE,
    DEFAULT_STORE,
    Workspace,
    make_source,
    resolve_store_url,
)
from feedledger.context import Context
from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import now_us

if TYPE_CHECKING:
    from feedledger.api.destination import Destination, DestinationLag, Manifest
    from feedledger.api.notify import Notifications
    from feedledger.api.source import Source


class Ledger(LedgerOperations):
    """An open workspace. A context manager; `close()` releases the store. The by-name
    operations the CLI uses (ingest, backfill, replay, review, archive) are in
    `LedgerOperations`."""

    def __init__(self, workspace: Workspace, *, leave_wal: bool = False) -> None:
        # leave_wal: the process ends right after close() (the CLI), so an SQLite store
        # leaves its write-ahead log to the next writer (Store.close)
        self.context = Context(workspace, leave_wal=leave_wal)
        # opened from a URL pair, not a feedledger.toml: sources live in memory only
        self._in_memory = not workspace.config_path.exists()

    @property
    def workspace(self) -> Workspace:
        return self.context.workspace

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        self.context.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sources ------------------------------------------------------------------------
    def source(self, name: str) -> Source:
        """The declared source `name` (feedledger.SourceNotFound if it is not)."""
        from feedledger.api.source import Source

        return Source(self, self.workspace.source(name))

    def sources(self, *, by_name: bool = True) -> list[SourceConfig]:
        """The declared sources, by name (`by_name=False`: in declaration order, as
        `source list` shows them)."""
        if not by_name:
            return list(self.workspace.sources.values())
        return [self.workspace.sources[n] for n in sorted(self.workspace.sources)]

    def add_source(self, name: str, *, replace: bool = False, **declaration: Any) -> Source:
        """Declare a source (the options of `feedledger source add`, as keyword values of
        `SourceConfig`: key, format, kind, timezone, cadence, fetch, revision, csv_delimiter,
        encoding...); written to feedledger.toml, or kept in memory by a ledger opened from
        URLs."""
        from feedledger.api.source import Source

        src = make_source(name, **declaration)
        if self._in_memory:
            if name in self.workspace.sources and not replace:
                raise ConfigError("source already declared", source=name)
            self.workspace.sources[name] = src
        else:
            self.workspace.add_source(src, replace=replace)
        return Source(self, src)

    def remove_source(self, name: str) -> None:
        """Remove the declaration (the ledger keeps the source's history)."""
        if self._in_memory:
            self.workspace.source(name)
            del self.workspace.sources[name]
        else:
            self.workspace.remove_source(name)

    # -- runs ---------------------------------------------------------------------------
    def runs(self, source: str) -> list[Run]:
        """Runs of a source, oldest first."""
        from feedledger.ledger.runs import list_runs

        self.workspace.source(source)
        return [Run.of(r) for r in list_runs(self.context.store, source)]

    def resolve_run(self, run_id: str) -> str:
        """A whole run id from any unique prefix (ConfigError if ambiguous)."""
        from feedledger.ledger import run_ids

        return run_ids.resolve(self.context.store, run_id)

    def changes(self, run_id: str) -> list[Change]:
        """What a run changed (added/changed/deleted, before and after), then the records
        it did not apply (`outcome` unresolved or superseded)."""
        from feedledger.ledger import queries

        run = self.resolve_run(run_id)
        store = self.context.store
        geo = self._is_geo_run(run)
        return [Change.of(c) for c in queries.changes(store, run, geo=geo)] + [
            Change.held(o) for o in queries.run_outcomes(store, run, geo=geo)
        ]

    def _is_geo_run(self, run_id: str) -> bool:
        """Whether the run's source is a GIS one (its changes say `geometry_changed`)."""
        from feedledger.ledger.runs import get_run
        from feedledger.model.errors import FeedledgerError

        found = get_run(self.context.store, run_id)
        if found is None:
            return False
        try:
            return self.workspace.source(found.source).is_geo
        except FeedledgerError:  # a source since removed from the workspace
            return False

    def retract(self, run_id: str, *, cascade: bool = False) -> Retraction:
        """Retract everything a run wrote, as a run of kind `retraction`
        (RetractConflictError if later runs depend on it, unless `cascade`)."""
        from feedledger.pipeline.retract import retract_run

        run = self.resolve_run(run_id)
        return Retraction.of(retract_run(self.context, run, cascade=cascade))

    # -- watching -----------------------------------------------------------------------
    def health(
        self, sources: list[str] | None = None, *, at: date | datetime | None = None
    ) -> list[SourceHealth]:
        """Per source: stale (missed publications), frozen, lease, notifications..."""
        from feedledger.pipeline.health import health

        for n in sources or []:
            self.workspace.source(n)
        when = instant_us(at, "UTC", "at") if at is not None else now_us()
        return [SourceHealth.of(h) for h in health(self.context, when, sources or None)]

    def add_destination(
        self,
        name: str,
        *,
        source: str,
        table: str,
        sqlite: str | os.PathLike[str] | None = None,
        postgres: str | None = None,
        text_fields: str | None = None,
        transform: str | None = None,
        generation: str = "M-1",
    ) -> Destination:
        """Declare a destination (SQLite file or PostgreSQL URL) and create or check its
        table (`destination add`); its live route starts now."""
        from feedledger.api.destination import Destination
        from feedledger.sync.destinations import add_destination

        declared = add_destination(
            self.context,
            name,
            source=source,
            postgres=postgres,
            sqlite=os.fspath(sqlite) if sqlite is not None else None,
            table=table,
            text_fields=text_fields,
            transform=transform,
            generation=generation,
        )
        return Destination(self, declared)

    def destination(self, name: str) -> Destination:
        """A registered destination (NotFoundError if there is none by that name)."""
        from feedledger.api.destination import Destination
        from feedledger.sync import registry

        return Destination(self, registry.get(self.context.store, name))

    def destinations(self) -> list[Destination]:
        """The registered destinations, by name (`destination list`)."""
        from feedledger.api.destination import Destination
        from feedledger.sync import registry

        return [Destination(self, d) for d in registry.listing(self.context.store)]

    def remove_destination(self, name: str) -> None:
        """Forget a destination (its table is left as it is)."""
        from feedledger.sync import registry

        registry.remove(self.context.store, name)

    def destination_lag(
        self, sources: list[str] | None = None, *, at: date | datetime | None = None
    ) -> list[DestinationLag]:
        """Per destination (of `sources`, default all): its live route's lag (`health`)."""
        from feedledger.api.destination import DestinationLag
        from feedledger.pipeline.health import destination_lag

        when = instant_us(at, "UTC", "at") if at is not None else now_us()
        return [DestinationLag.of(d) for d in destination_lag(self.context, when, sources)]

    # -- manifests (populations for destination rebuilds) ---------------------------------
    def create_manifest(
        self,
        name: str,
        *,
        source: str,
        generation: str | None = None,
        keys_from: str | os.PathLike[str] | None = None,
    ) -> Manifest:
        """Freeze the keys of `source` live now (or those of `keys_from`, one per line),
        its boundary and the transform generation (default: its destination's)."""
        from feedledger.api.destination import Manifest
        from feedledger.sync.reconcile import create_manifest

        keys = Path(keys_from) if keys_from is not None else None
        man = create_manifest(self.context, name, source, generation=generation, keys_from=keys)
        return Manifest.of(man)

    def manifest(self, name: str) -> Manifest:
        """A manifest by name (NotFoundError if there is none)."""
        from feedledger.api.destination import Manifest
        from feedledger.sync import manifests

        return Manifest.of(manifests.get(self.context.store, name))

    def manifests(self) -> list[Manifest]:
        """The manifests, by name."""
        from feedledger.api.destination import Manifest
        from feedledger.sync import manifests

        return [Manifest.of(m) for m in manifests.listing(self.context.store)]

    # -- notifications --------------------------------------------------------------------
    @property
    def notify(self) -> Notifications:
        """Subscribers and the delivery of their notifications."""
        from feedledger.api.notify import Notifications

        return Notifications(self)


def _path_text(value: str | os.PathLike[str]) -> str:
    return os.fspath(value)


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    store: str | None = None,
    archive: str | os.PathLike[str] | None = None,
    archive_endpoint_url: str | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Ledger:
    """Open a workspace: `open("dir")` (or the path of its feedledger.toml) reads its
    configuration, as the CLI's `--config` does; `open(store=URL, archive=DIR|s3://...)`
    opens a store and an archive directly (sources then declared with `add_source`, in
    memory; `root`: where relative paths and the local cache go, default the current
    folder). The store must exist (`feedledger.init` or `feedledger db upgrade`)."""
    if path is not None:
        if store is not None or archive is not None:
            raise ConfigError("give a workspace path, or store= and archive=, not both")
        p = Path(path)
        return Ledger(Workspace.load(p / CONFIG_NAME if p.is_dir() else p))
    base = Path(root).resolve() if root is not None else Path.cwd()
    location = _path_text(archive) if archive is not None else DEFAULT_ARCHIVE
    if "://" not in location:
        location = str((base / location).resolve())
    ws = Workspace(
        root=base,
        config_path=base / f".{CONFIG_NAME}.in-memory",
        store_url=resolve_store_url(store or DEFAULT_STORE, base),
        archive_location=location,
        archive_endpoint_url=archive_endpoint_url,
    )
    return Ledger(ws)


def open_config(config: str | os.PathLike[str] | None = None, *, leave_wal: bool = False) -> Ledger:
    """Open the workspace of a feedledger.toml as the CLI's `--config` names it (None:
    ./feedledger.toml or $FEEDLEDGER_CONFIG). `leave_wal`: see `Ledger`."""
    from feedledger.api.workspace import load_workspace

    return Ledger(load_workspace(config), leave_wal=leave_wal)


def init(
    path: str | os.PathLike[str] = ".",
    *,
    store: str | None = None,
    archive: str | None = None,
    archive_endpoint_url: str | None = None,
) -> Ledger:
    """Create a workspace (the CLI's `feedledger init`): feedledger.toml, the store
    (schema by Alembic) and the archive folder (or check that the bucket answers)."""
    from feedledger.api.workspace import create

    ws, _created = create(
        path, store=store, archive=archive, archive_endpoint_url=archive_endpoint_url
    )
    return Ledger(ws)
