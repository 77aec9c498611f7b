"""`feedledger.open` / `feedledger.init` and the Ledger: one workspace (its store,
archive and state cache: one `feedledger.context.Context`). The Ledger opens the
workspace's sources (`led.source(name)`: what one source does is `Source`'s) and holds
what spans them: the declarations, run ids (changes, retraction, review, run pages, the
write audit), health, destinations and manifests, notifications, the archive's upkeep."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api import archive, destination_status, lake
from feedledger.api._deprecated import deprecated
from feedledger.api.archive import (
    ArchiveCompacted,
    ArchiveVerified,
    OnArchiveProgress,
    Reindexed,
    Rejected,
)
from feedledger.api.destination import Destination, create_manifest
from feedledger.api.lake import DeltaPosition
from feedledger.api.notify import Notifications
from feedledger.api.results import (
    DestinationLag,
    Ingested,
    Manifest,
    NothingToDo,
    ResidentProcess,
    Run,
    SourceHealth,
    WindowRun,
)
from feedledger.api.runs.methods import RunMethods
from feedledger.api.source import Source
from feedledger.api.times import instant_us
from feedledger.api.windows import one_source
from feedledger.api.workspace import create, doctor, load_workspace
from feedledger.api.workspace.doctor import DoctorReport
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
    from feedledger.lake.export import DeltaExport


class Ledger(RunMethods):
    """An open workspace. A context manager; `close()` releases the store.

    Runs by id and the write audit: `runs/methods.py`."""

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
    def source(self, name: str, *, require_declared: bool = True) -> Source:
        """The declared source `name` (feedledger.SourceNotFound if it is not).
        `require_declared=False`: a handle even on a name the workspace does not declare
        (the CLI's `ingest` and `archive list --rejected`): its `ingest` keeps the refused
        bytes for inspection, its `rejected_payloads` reads the archive alone; what needs
        the declaration raises SourceNotFound then."""
        if not require_declared:
            return Source(self.context, name, self.workspace.sources.get(name))
        return Source(self.context, name, self.workspace.source(name))

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
        src = make_source(name, **declaration)
        if self._in_memory:
            if name in self.workspace.sources and not replace:
                raise ConfigError("source already declared", source=name)
            self.workspace.sources[name] = src
        else:
            self.workspace.add_source(src, replace=replace)
        return Source(self.context, name, src)

    def remove_source(self, name: str) -> None:
        """Remove the declaration (the ledger keeps the source's history)."""
        if self._in_memory:
            self.workspace.source(name)
            del self.workspace.sources[name]
        else:
            self.workspace.remove_source(name)

    # -- watching -----------------------------------------------------------------------
    def health(
        self, sources: list[str] | None = None, *, at: date | datetime | None = None
    ) -> list[SourceHealth]:
        """Per source: stale (missed publications), frozen, lease, notifications..."""
        from feedledger.pipeline.health import health  # lazy: SQLAlchemy, Arrow

        for n in sources or []:
            self.workspace.source(n)
        when = instant_us(at, "UTC", "at") if at is not None else now_us()
        return [SourceHealth.of(h) for h in health(self.context, when, sources or None)]

    def doctor(
        self,
        *,
        full: bool = False,
        sample: int | None = None,
        skip: list[str] | None = None,
        at: date | datetime | None = None,
        min_free_bytes: int | None = None,
        destination_lag_s: float | None = None,
    ) -> DoctorReport:
        """The workspace checked as a whole (`feedledger doctor`): each problem a finding
        with what it means and the command that fixes it. State caches are checked whole
        under 100k keys (sampled above), archive objects `sample` per source (default
        5); `full` checks everything whole. `skip`: checks left out (`CHECK_NAMES`);
        `at`: judge staleness and lag at that instant; the disk-free and destination-lag
        thresholds may be given."""
        return doctor.doctor(
            self.context,
            full=full,
            sample=sample,
            skip=skip,
            at=at,
            min_free_bytes=min_free_bytes,
            destination_lag_s=destination_lag_s,
        )

    def resident(self) -> list[ResidentProcess]:
        """The scheduler processes of this workspace running on this host and the diff
        states each keeps warm in memory (with their bytes, and whether each is current)."""
        from feedledger.pipeline.resident import resident  # lazy: SQLAlchemy

        return [ResidentProcess.of(r) for r in resident(self.context)]

    # -- destinations ---------------------------------------------------------------------
    def add_destination(
        self,
        name: str,
        *,
        source: str,
        table: str | None = None,
        sqlite: str | os.PathLike[str] | None = None,
        postgres: str | None = None,
        text_fields: str | None = None,
        transform: str | None = None,
        generation: str = "M-1",
        gpkg: str | os.PathLike[str] | None = None,
        layer: str | None = None,
        tantivy: str | os.PathLike[str] | None = None,
        postgis: str | None = None,
        srid: int | None = None,
    ) -> Destination:
        """Declare a destination -- a table in an SQLite file or a PostgreSQL database
        (`table`), a GeoPackage file's layer (`gpkg`, `layer`), a tantivy full-text
        index in a folder (`tantivy`, searched by `text_fields`), or a PostGIS table
        (`postgis` URL, `table`, `srid`: the geometry column's, when it is created;
        default the source's EPSG code) -- and create or check
        it (`destination add`); its live route starts now."""
        from feedledger.sync.destinations import add_destination  # lazy: SQLAlchemy, Arrow

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
            gpkg=os.fspath(gpkg) if gpkg is not None else None,
            layer=layer,
            tantivy=os.fspath(tantivy) if tantivy is not None else None,
            postgis=postgis,
            srid=srid,
        )
        return Destination(self.context, declared)

    def destination(self, name: str) -> Destination:
        """A registered destination (NotFoundError if there is none by that name)."""
        from feedledger.sync import registry  # lazy: SQLAlchemy, Arrow

        return Destination(self.context, registry.get(self.context.store, name))

    def destinations(self) -> list[Destination]:
        """The registered destinations, by name (`destination list`)."""
        from feedledger.sync import registry  # lazy: SQLAlchemy, Arrow

        return [Destination(self.context, d) for d in registry.listing(self.context.store)]

    def remove_destination(self, name: str) -> None:
        """Forget a destination (its table is left as it is)."""
        from feedledger.sync import registry  # lazy: SQLAlchemy, Arrow

        registry.remove(self.context.store, name)

    def destination_lag(
        self, sources: list[str] | None = None, *, at: date | datetime | None = None
    ) -> list[DestinationLag]:
        """Per destination (of `sources`, default all): its live route's lag (`health`)."""
        when = instant_us(at, "UTC", "at") if at is not None else now_us()
        return destination_status.lags(self.context, sources, when)

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
        return create_manifest(
            self.context, name, source=source, generation=generation, keys_from=keys_from
        )

    def manifest(self, name: str) -> Manifest:
        """A manifest by name (NotFoundError if there is none)."""
        from feedledger.sync import manifests  # lazy: SQLAlchemy, Arrow

        return Manifest.of(manifests.get(self.context.store, name))

    def manifests(self) -> list[Manifest]:
        """The manifests, by name."""
        from feedledger.sync import manifests  # lazy: SQLAlchemy, Arrow

        return [Manifest.of(m) for m in manifests.listing(self.context.store)]

    # -- notifications --------------------------------------------------------------------
    @property
    def notify(self) -> Notifications:
        """Subscribers and the delivery of their notifications."""
        return Notifications(self.context)

    # -- the archive's upkeep -------------------------------------------------------------
    def reindex_archive(self) -> Reindexed:
        """Rebuild the store's payload index from the archive alone (`archive reindex`)."""
        return archive.reindex(self.context)

    def compact_archive(
        self, source: str | None = None, progress: OnArchiveProgress | None = None
    ) -> ArchiveCompacted:
        """Compress the archive's raw payload objects in place, crash-safe (`archive
        compact`; the store is not opened)."""
        return archive.compact(self.context, source, progress)

    def verify_archive(
        self, source: str | None = None, progress: OnArchiveProgress | None = None
    ) -> ArchiveVerified:
        """Read back every archived payload and check its sha256 (`archive verify`)."""
        return archive.verify(self.context, source, progress)

    # -- the history as a Delta Lake table (the `delta` extra) ---------------------------
    def export_delta(
        self,
        sources: list[str],
        to: str | os.PathLike[str],
        *,
        progress: lake.OnDeltaProgress | None = None,
        follow: bool | None = None,
    ) -> DeltaExport:
        """Write the sources' bitemporal history to the Delta table at `to` (a folder or
        s3://bucket/prefix on the archive's object store): every version, retracted ones
        too, partitioned by source and valid year; later calls add what was recorded or
        retracted since, in ONE Delta commit each (`feedledger.lake`). `follow`: the
        scheduler exports after each run of these sources (True), or no longer (False)."""
        return lake.export_delta(self.context, sources, to, progress=progress, follow=follow)

    def delta_exports(self, to: str | os.PathLike[str] | None = None) -> list[DeltaPosition]:
        """How far each Delta table holds each source (of the table `to` only)."""
        return lake.delta_exports(self.context, to)

    # -- deprecated: a source's operations are `Source`'s (`led.source(name).<call>`) ----
    def ingest(self, source: str, *args: Any, **kwargs: Any) -> Ingested:
        """Deprecated: `led.source(name, require_declared=False).ingest(...)`."""
        deprecated("Ledger.ingest(source, ...)", "Ledger.source(source).ingest(...)")
        return self.source(source, require_declared=False).ingest(*args, **kwargs)

    def backfill(
        self, source: str | list[str], *args: Any, **kwargs: Any
    ) -> WindowRun | NothingToDo:
        """Deprecated: `led.source(name).backfill(...)`."""
        deprecated("Ledger.backfill(source, ...)", "Ledger.source(source).backfill(...)")
        return self.source(one_source(source)).backfill(*args, **kwargs)

    def replay(self, source: str | list[str], *args: Any, **kwargs: Any) -> WindowRun | NothingToDo:
        """Deprecated: `led.source(name).replay(...)`."""
        deprecated("Ledger.replay(source, ...)", "Ledger.source(source).replay(...)")
        return self.source(one_source(source)).replay(*args, **kwargs)

    def runs(self, source: str) -> list[Run]:
        """Deprecated: `led.source(name).runs()`."""
        deprecated("Ledger.runs(source)", "Ledger.source(source).runs()")
        return self.source(source).runs()

    def rejected_payloads(self, source: str) -> list[Rejected]:
        """Deprecated: `led.source(name, require_declared=False).rejected_payloads()`."""
        deprecated("Ledger.rejected_payloads(source)", "Ledger.source(source).rejected_payloads()")
        return self.source(source, require_declared=False).rejected_payloads()


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
    ws, _created = create(
        path, store=store, archive=archive, archive_endpoint_url=archive_endpoint_url
    )
    return Ledger(ws)
