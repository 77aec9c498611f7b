"""A GeoPackage layer as a destination: QGIS opens the file while feedledger updates it.

Each batch is ONE SQLite transaction (`BEGIN IMMEDIATE`: the file's one writer from the
first read to the commit): the rows held for the batch's keys are read, the guard judges
each document (sync/guard.py's `judge`, the same verdicts as every kind), and the
accepted ones are written in place -- a present record is an upsert of its feature (the
geometry a GeoPackage blob, sync/kinds/gpkg_binary.py; the document's members as
attribute columns, added when first seen; the guard's columns `fl_key`, `fl_revision`,
`fl_generation`, `fl_generation_rank`, `fl_content_hash`, `fl_written_at` next to
them), a deletion (or a record the transform left out) removes its feature and keeps
its tombstone in the side table `gpkgext_feedledger_<layer>_tombstones`, which QGIS
does not list: the layer shows present features only, and a tombstone still stops any
older write. The R-tree index is kept by GDAL's own triggers (their ST_ functions registered on the
connection); `gpkg_contents`' extent and `last_change` are updated in the same
transaction (the extent grown by the batch, or recomputed from the R-tree when a
feature on its edge moved or went: R-tree boxes are float32, rounded outwards, so the
extent is never smaller than the features). The commit is the acknowledgement.

A rebuild (`rebuild=manifest id`) writes a NEW file beside the old one
(gpkg_file.rebuild_path), begun as a copy of the old one (`VACUUM INTO`: tombstones
kept, and a repeated rebuild finds its documents already current, as in a table; a
resumed rebuild continues its file), so QGIS never sees a half-rebuilt layer (a new
transform generation, say). `finish` makes it the destination: under the old file's
write lock, every row of the old file is written into the new one through the guard
(what the live route wrote meanwhile, tombstones included: the newer position wins),
the old file is marked "replaced by" the new one and committed, then the new file is
fsynced and renamed over the old (`os.replace`) and the folder fsynced
(sync/kinds/gpkg_swap.py). A writer that finds the mark (another process's live route)
finishes the swap itself and writes to the new file; a kill anywhere leaves either the
old file or the new one in place, each complete.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from feedledger import faults
from feedledger.ledger import failures
from feedledger.ledger.store import Store, payload_crs
from feedledger.model.destination import Destination
from feedledger.sync.guard import evidence as guard_evidence
from feedledger.sync.guard import judge
from feedledger.sync.kinds import gpkg_binary, gpkg_file, gpkg_swap
from feedledger.sync.kinds.base import LockedBatches, Row
from feedledger.sync.kinds.gpkg_file import Layout
from feedledger.sync.kinds.gpkg_layer import LayerRows
from feedledger.sync.kinds.gpkg_rows import Item
from feedledger.sync.state import Verdict
from feedledger.sync.transform import Doc

MOD = 2305843009213693951  # 2^61 - 1, as reconcile's checksum


class GeoPackage(LayerRows, LockedBatches):
    writers = 1  # one writer per file: SQLite's lock

    def __init__(
        self,
        dest: Destination,
        *,
        geo: bool = False,
        store: Store | None = None,
        rebuild: str | None = None,
    ) -> None:
        super().__init__()
        self.dest = dest
        self.layer = dest.table
        self.path = Path(dest.url)
        self.geo = geo
        self.store = store
        self.rebuild = rebuild
        self.into = self.path  # where writes go (a rebuild's new file until `finish`)
        self.conn: sqlite3.Connection | None = None
        self.geom: str | None = None  # the geometry column (None: an attribute table)
        self.srs_id = 0
        self.multi = False
        self.z = False  # the layer's geometries have Z (else written 2-D)
        self.columns: dict[str, str] = {}  # attribute column (lower case) -> its name
        self._low: dict[str, str] = {}  # a member's name -> its column's, lower case
        self._live: GeoPackage | None = None  # a rebuild's: the file in place

    # -- the file ---------------------------------------------------------------------------
    def ensure(self) -> None:
        with self.lock, self._mapped():
            self._ensure_file(self.path)
            if self.rebuild is not None:
                self.into = gpkg_file.rebuild_path(self.path, self.rebuild)
                if not self.into.exists():  # (a resumed rebuild continues its file)
                    gpkg_file.copy(self.path, self.into)
                self._ensure_file(self.into)
            self._open(self.into)

    def _ensure_file(self, path: Path) -> None:
        if path.exists():
            gpkg_file.check_header(path)
            conn = gpkg_file.connect(path)
            try:
                found = gpkg_file.check(conn, path, self.layer, self.geo)
            finally:
                conn.close()
            if found != "":
                return
        gpkg_file.create(path, self.layer, self._layout())

    def _layout(self) -> Layout:
        """The layer's CRS and geometry type, from the source's current state."""
        if not self.geo:
            return Layout(None, None)
        if self.store is None:
            return Layout(None, "Unknown")
        from feedledger.sync.versions import geometry_types  # lazy: a new layer only

        wm = self.store.watermark(self.dest.source)
        crs = payload_crs(self.store, wm.payload_id) if wm is not None and wm.payload_id else None
        kind = gpkg_file.layer_type(geometry_types(self.store, self.dest.source))
        return Layout(crs, kind)

    def _open(self, path: Path) -> None:
        if self.conn is not None:
            self.conn.close()
        conn = gpkg_file.connect(path)
        gpkg_binary.register(conn)
        self.conn = conn
        self.geom = gpkg_file.check(conn, path, self.layer, self.geo) or None
        if self.geom is not None:
            srs, kind = conn.execute(
                "SELECT srs_id, geometry_type_name FROM gpkg_geometry_columns "
                "WHERE lower(table_name) = lower(?)",
                (self.layer,),
            ).fetchone()
            self.srs_id, self.multi = int(srs), str(kind).upper().startswith("MULTI")
            self.z = bool(conn.execute(
                "SELECT z FROM gpkg_geometry_columns WHERE lower(table_name) = lower(?)",
                (self.layer,),
            ).fetchone()[0])  # fmt: skip
        self._read_columns(conn)

    def close(self) -> None:
        with self.lock:
            self.close_connection()
        if self._live is not None:
            self._live.close()

    def live(self) -> GeoPackage:
        """While a rebuild writes its new file, the live route writes the file in
        place (its own connection), and `finish` merges that into the new one."""
        if self.rebuild is None:
            return self
        if self._live is None:
            self._live = GeoPackage(self.dest, geo=self.geo, store=self.store)
            self._live.ensure()
        return self._live

    def _mapped(self, *, reading: bool = False) -> AbstractContextManager[None]:
        """A driver's error under the block as one line naming the destination."""
        place = failures.Place(str(self.path), destination=self.dest.name, reading=reading)
        return failures.translating(place)

    def connection(self) -> sqlite3.Connection:
        """The connection, following a swap another process announced in the file."""
        if self.conn is None:
            self._open(self.into)
        assert self.conn is not None
        if self.into == self.path and gpkg_file.replaced_by(self.conn) is not None:
            self._follow()
        assert self.conn is not None
        return self.conn

    def _follow(self) -> None:
        """The file is marked replaced: finish the swap if its writer did not, reopen;
        a mark whose new file is gone and was never swapped in is cleared."""
        assert self.conn is not None
        new = gpkg_file.replaced_by(self.conn)
        if new is not None:
            gpkg_file.swap(Path(new), self.path)
        self._open(self.path)
        assert self.conn is not None
        if gpkg_file.replaced_by(self.conn) is not None and not Path(new or "").exists():
            self.conn.execute("BEGIN IMMEDIATE")
            gpkg_file.clear_mark(self.conn)
            self.conn.execute("COMMIT")

    # -- the guarded write --------------------------------------------------------------------
    def _items(self, docs: Sequence[Doc]) -> list[Item]:
        """Docs as layer rows: attributes parsed (a GIS source's `geometry` member is the
        geometry column's, not an attribute), WKB as GeoPackage blobs."""
        blobs: list[bytes | None] = [None] * len(docs)
        if self.geo:
            blobs, _box = gpkg_binary.encode([d.wkb for d in docs], self.srs_id, self.multi, self.z)
        out = []
        for d, blob in zip(docs, blobs, strict=True):
            attrs = None
            if not d.deleted and d.doc is not None:
                parsed = json.loads(d.doc)
                attrs = parsed if isinstance(parsed, dict) else {"value": parsed}
                if self.geo:
                    attrs.pop("geometry", None)
            out.append(Item(d.key, d.revision, d.generation, d.rank, d.content_hash,
                            d.deleted, d.doc, attrs, None if d.deleted else blob))  # fmt: skip
        return out

    def _begin(self) -> sqlite3.Connection:
        """BEGIN IMMEDIATE on the file writes go to (after a swap: the new one)."""
        for _ in range(3):
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            if self.into != self.path or gpkg_file.replaced_by(conn) is None:
                return conn
            conn.execute("ROLLBACK")  # replaced while this process waited for the lock
            self._follow()
        raise RuntimeError(f"GeoPackage {self.path} keeps being replaced")

    def _write(self, docs: Sequence[Doc], ticket: int) -> list[Verdict]:
        conn = self._begin()
        try:
            judged = self.apply(conn, docs)
            faults.point("destination_staged", ticket)  # written, not committed
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return judged

    def apply(self, conn: sqlite3.Connection, items: Sequence[Doc | Item]) -> list[Verdict]:
        """The batch judged and written in the open transaction; its verdicts (documents
        are made layer rows only where the guard accepts them)."""
        held = self._held(conn, [i.key for i in items])
        verdicts: list[Verdict] = []
        write: list[Any] = []
        for item in items:
            row = held.get(item.key)
            verdict, reason = judge(item, row)  # type: ignore[arg-type]
            if verdict == "accepted":
                write.append(item)
            evidence = None
            if verdict == "unresolved" and row is not None:
                evidence = guard_evidence(item, row._replace(doc=self._attrs(conn, row.fid)))  # type: ignore[arg-type]
            verdicts.append(Verdict(item.key, verdict, item.revision, item.generation,
                                    item.content_hash, reason, evidence))  # fmt: skip
        if write:
            docs = [w for w in write if isinstance(w, Doc)]
            made = self._items(docs) if docs else []
            self._put(conn, [*made, *(w for w in write if isinstance(w, Item))], held)
        return verdicts

    # -- a rebuild's new file ---------------------------------------------------------------
    def finish(self) -> None:
        """Make a rebuild's new file the destination (sync/kinds/gpkg_swap.py)."""
        if self.rebuild is None or self.into == self.path:
            return
        with self.lock, self._mapped():
            gpkg_swap.finish(self)
            self._open(self.path)

    def close_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- reading back ---------------------------------------------------------------------
    def rows(self, lo: str | None = None, hi: str | None = None) -> list[Row]:
        where, params = "", tuple[str, ...]()
        if lo is not None and hi is not None:
            where, params = " WHERE fl_key >= ? AND fl_key <= ?", (lo, hi)
        with self.lock, self._mapped(reading=True):
            conn = self.connection()
            sql = self._union_sql("", where) + " ORDER BY 1"
            return [tuple(r) for r in conn.execute(sql, params * 2)]

    def held(self, keys: Sequence[str]) -> Row | None:
        with self.lock, self._mapped(reading=True):
            conn = self.connection()
            sql = self._union_sql(", fl_written_at", " WHERE fl_key = ?")
            for key in keys:
                row = conn.execute(sql, (key, key)).fetchone()
                if row is not None:
                    return tuple(row)
        return None

    def bucket_sums(self, bounds: Sequence[tuple[str, str]]) -> list[tuple[int, int, int, int]]:
        out = []
        inner = self._union_sql("", " WHERE fl_key >= ? AND fl_key <= ?")
        sql = (
            f"SELECT count(*), coalesce(sum(fl_revision % {MOD}), 0), "
            f"coalesce(sum(fl_generation_rank), 0), coalesce(sum(deleted), 0) FROM ({inner})"
        )
        with self.lock, self._mapped(reading=True):
            conn = self.connection()
            for lo, hi in bounds:
                r = conn.execute(sql, (lo, hi, lo, hi)).fetchone()
                out.append((int(r[0]), int(r[1]), int(r[2]), int(r[3])))
        return out
