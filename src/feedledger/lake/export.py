"""`feedledger export delta SOURCE... --to URI`: the sources' bitemporal history written
as one Delta Lake table, incrementally, one Delta commit per call.

Per source, the table's position is a transaction instant K: the table holds every
version recorded by K, each with `valid_to` and `retracted_at` as known at K. A call:

1. reads each source's position from the table itself (its app transaction,
   `lake/target.py`) -- not from the store, so an export killed after its commit and
   before the store's copy was saved neither loses nor repeats anything: the store's
   row (`lake/positions.py`) is put right and the call goes on from there;
2. takes K' = the source's watermark `recorded_at` (the instant of its last commit);
   nothing to do when K' is the table's K;
3. reads the versions concerned as known at K' (`ledger/readers/history_rows.py`): on a
   first export all of them; later only the keys with a version recorded or retracted
   in (K, K'], each key's whole history (a newer version changes the `valid_to` of the
   one before; a retraction reopens it);
4. keeps the new rows and the exported rows whose `valid_to` or `retracted_at` changed
   (`lake/rows.py`), and writes every source's rows in ONE commit: an append when no
   exported row changed, else a merge (update those rows, insert the others:
   `lake/rewrite.py` for a local table, delta-rs's MERGE otherwise). The
   commit carries each source's K' (app transactions) and, as its metadata, the
   instants and the feedledger version: Delta's version history follows feedledger's
   transaction time, and time travel to version N is `asof --known-at K'` of N;
5. saves the positions in the store.

A call with one source to export for the first time streams steps 3-4
(`lake/stream.py`): the source read in key order a chunk of keys at a time, its rows
written as they come, still one commit -- memory a chunk's, not the history's.

A kill before step 4's commit leaves the table as it was; after it, step 1 of the next
call finds the commit. Two exports of one table at once: delta-rs's optimistic commit
lets one win and the other fail with a conflict (run it again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from feedledger.context import Context
from feedledger.lake import positions
from feedledger.lake.rows import changed, delta_rows, geo_note, with_geo_note
from feedledger.lake.target import DeltaTarget, normalised, storage_options
from feedledger.ledger.readers import history_rows
from feedledger.model.timeutil import iso, now_us
from feedledger.pipeline.exports import order

__all__ = ["DeltaExport", "SourceExport", "export", "follow_run"]

Progress = Callable[[str, str, int, int], None]  # (source, stage, done, total)
_FOREVER = (1 << 62) - 1


@dataclass(frozen=True)
class SourceExport:
    """What one call did for one source."""

    source: str
    since: int | None  # the table's position before (None: never exported)
    known_at: int | None  # its position after (None: nothing recorded yet)
    inserted: int = 0
    updated: int = 0
    resumed: bool = False  # the store's copy was behind the table (a killed export)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "since": iso(self.since),
            "known_at": iso(self.known_at),
            "inserted": self.inserted,
            "updated": self.updated,
            "resumed": self.resumed,
        }


@dataclass(frozen=True)
class DeltaExport:
    """What one `export delta` call did."""

    target: str
    delta_version: int | None  # the table's version after the call (None: no table)
    committed: bool  # False: nothing new, no commit
    sources: list[SourceExport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "delta_version": self.delta_version,
            "committed": self.committed,
            "rows": sum(s.inserted + s.updated for s in self.sources),
            "sources": [s.to_json() for s in self.sources],
        }


def _target(ctx: Context, uri: str) -> DeltaTarget:
    name = normalised(uri)
    return DeltaTarget(name, storage_options(name, ctx.workspace.archive_endpoint_url))


def export(
    ctx: Context,
    sources: list[str],
    uri: str,
    *,
    progress: Progress | None = None,
    follow: bool | None = None,
) -> DeltaExport:
    """Export `sources` to the Delta table at `uri` (see the module doc); `follow`:
    turn the scheduler's export after each run on (True) or off (False)."""
    from feedledger import faults  # lazy: crash points of the kill tests

    tell = progress or (lambda _s, _st, _d, _t: None)
    tgt = _target(ctx, uri)
    configs = [ctx.workspace.source(name) for name in sources]  # unknown: SourceNotFound
    stored = {p.source: p for p in positions.positions(ctx.store, tgt.uri)}
    schema = tgt.schema()
    known_types: dict[str, pa.DataType] = {f.name: f.type for f in schema} if schema else {}
    parts: list[pa.Table] = []
    done: dict[str, SourceExport] = {}
    work: list[tuple[Any, int | None, int, bool]] = []  # (source, since, known, resumed)
    moved: dict[str, int] = {}
    any_updates = False
    geo_crs: str | None = None
    for src in configs:
        name = src.name
        since = tgt.position(name)
        resumed = since is not None and (name not in stored or stored[name].known_at != since)
        if resumed:
            assert since is not None
            positions.save(
                ctx.store, tgt.uri, name, known_at=since, delta_version=tgt.version() or 0,
                at=now_us(),
            )  # fmt: skip
        wm = ctx.store.watermark(name)
        if wm is None or (since is not None and wm.recorded_at <= since):
            done[name] = SourceExport(name, since, since, resumed=resumed)
        else:
            work.append((src, since, wm.recorded_at, resumed))
    if len(work) == 1 and work[0][1] is None:  # one first export: streamed
        streamed = _streamed(ctx, tgt, work[0], known_types, tell)
        if streamed is not None:
            _follow(ctx, tgt.uri, configs, follow)
            done[streamed.sources[0].source] = streamed.sources[0]
            return DeltaExport(tgt.uri, streamed.delta_version, True, _ordered(configs, done))
    for src, since, known, resumed in work:
        name = src.name
        rows, updates = _source_rows(ctx, src, since, known, known_types, tell)
        if src.is_geo:
            geo_crs = geo_crs or _crs(ctx, name, known)
        for f in rows.schema:
            known_types.setdefault(f.name, f.type)
        moved[name] = known
        if rows.num_rows:
            parts.append(rows)
        any_updates = any_updates or updates > 0
        done[name] = SourceExport(name, since, known, rows.num_rows - updates, updates, resumed)
    if not moved or not parts:
        _follow(ctx, tgt.uri, configs, follow)
        return DeltaExport(tgt.uri, tgt.version(), False, _ordered(configs, done))
    table = pa.concat_tables(parts, promote_options="default")
    tell("", "commit", 0, 1)
    faults.point("delta_before_commit")
    metadata = {
        "feedledger.known_at": ",".join(f"{s}={iso(k)}" for s, k in moved.items()),
        "feedledger.exported_at": str(iso(now_us())),
    }
    if _any_geo(configs):
        table = with_geo_note(table, geo_note(_projjson(geo_crs)))
    version = tgt.commit(table, moved, updates=any_updates, metadata=metadata)
    faults.point("delta_after_commit")
    at = now_us()
    for name, known in moved.items():
        positions.save(ctx.store, tgt.uri, name, known_at=known, delta_version=version, at=at)
    _follow(ctx, tgt.uri, configs, follow)
    tell("", "commit", 1, 1)
    return DeltaExport(tgt.uri, version, True, _ordered(configs, done))


def _ordered(configs: list[Any], done: dict[str, SourceExport]) -> list[SourceExport]:
    return [done[c.name] for c in configs if c.name in done]


def _streamed(
    ctx: Context,
    tgt: DeltaTarget,
    work: tuple[Any, int | None, int, bool],
    known_types: dict[str, pa.DataType],
    tell: Progress,
) -> DeltaExport | None:
    """One source's first export streamed in ONE commit (`lake/stream.py`); None when it
    cannot be (no version, or a chunk that does not fit the first's schema: nothing
    committed, the caller builds the rows in memory)."""
    from feedledger import faults  # lazy: crash points of the kill tests
    from feedledger.lake.stream import FirstExport  # lazy: as this module's callers

    src, _, known, resumed = work
    name = src.name
    layout = order.layout_at(ctx, name, _FOREVER, known)
    fields = order.field_order(ctx, layout, src.format)
    crs = _projjson(_crs(ctx, name, known)) if src.is_geo else None
    first = FirstExport(ctx, src, known, fields, crs, tell, table_types=dict(known_types))
    reader = first.reader()
    if reader is None:
        return None
    tell("", "commit", 0, 1)
    faults.point("delta_before_commit")
    metadata = {
        "feedledger.known_at": f"{name}={iso(known)}",
        "feedledger.exported_at": str(iso(now_us())),
    }
    try:
        version = tgt.commit(reader, {name: known}, updates=False, metadata=metadata)
    except Exception:
        if first.refused():
            return None
        raise
    faults.point("delta_after_commit")
    positions.save(ctx.store, tgt.uri, name, known_at=known, delta_version=version, at=now_us())
    tell("", "commit", 1, 1)
    return DeltaExport(
        tgt.uri, version, True, [SourceExport(name, None, known, first.rows, 0, resumed)]
    )


def _follow(ctx: Context, target: str, configs: list[Any], follow: bool | None) -> None:
    if follow is not None:
        positions.set_follow(ctx.store, target, [c.name for c in configs], follow)


def _source_rows(
    ctx: Context,
    src: Any,
    since: int | None,
    known: int,
    known_types: dict[str, pa.DataType],
    tell: Progress,
) -> tuple[pa.Table, int]:
    """(the Delta rows `src` adds or changes from `since` to `known`, how many of them
    are updates of exported rows)."""
    import pyarrow.compute as pc  # lazy: as the readers

    name = src.name
    if since is None:
        keys = None
    else:
        keys = history_rows.touched_keys(ctx.store, name, since, known)
        if not keys:
            return pa.table({}), 0
    read: list[pa.RecordBatch] = []
    total = 0
    for batch in history_rows.versions_of(ctx.store, name, known, keys):
        read.append(batch)
        total += batch.num_rows
        tell(name, "read", total, 0)
    versions = pa.Table.from_batches(read, schema=history_rows.DECODED)
    picked = changed(versions, since)
    updates = 0
    if since is not None and picked.num_rows:
        updates = int(pc.sum(pc.less_equal(picked.column("recorded_at"), since)).as_py() or 0)
    layout = order.layout_at(ctx, name, _FOREVER, known)
    fields = order.field_order(ctx, layout, src.format)
    tell(name, "rows", picked.num_rows, picked.num_rows)
    rows = delta_rows(name, picked, fields, geo=src.is_geo, known_types=known_types)
    return rows, updates


def _any_geo(configs: list[Any]) -> bool:
    return any(c.is_geo for c in configs)


def _crs(ctx: Context, source: str, known: int) -> str | None:

    layout = order.layout_at(ctx, source, _FOREVER, known)
    return layout.crs if layout is not None else None


def _projjson(crs: str | None) -> dict[str, Any] | None:
    if crs is None:
        return None
    from feedledger.pipeline.exports.geo import projjson  # lazy: GDAL

    return projjson(crs)


def status(ctx: Context, uri: str | None = None) -> list[positions.Position]:
    """The store's export positions (of one target)."""
    return positions.positions(ctx.store, normalised(uri) if uri is not None else None)


def follow_run(ctx: Context, source: str) -> list[DeltaExport]:
    """The exports that follow `source`'s runs, brought up to date (the scheduler's hook,
    after an attempt that applied payloads)."""
    return [export(ctx, [source], target) for target in positions.followed(ctx.store, source)]
