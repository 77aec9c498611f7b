"""A GeoPackage layer's rows as the destination kind reads and writes them, inside a
transaction `sync/kinds/gpkg.py` opened on the file: the rows held for a batch's keys
(the layer's features and its side table of tombstones), the accepted items written (an
upsert of a feature, a deletion moved to the tombstones, attribute columns added when
first seen), and `gpkg_contents`' extent and `last_change` kept with them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from feedledger.sync.kinds.gpkg_file import GUARD_NAMES, quote, tombstones
from feedledger.sync.kinds.gpkg_rows import CHUNK, Held, Item, column, sql_type, union_box, value


class LayerRows:
    """The layer's SQL; `GeoPackage` holds the file, its connection and the guard."""

    layer: str
    geom: str | None  # the geometry column (None: an attribute table)
    columns: dict[str, str]  # attribute column (lower case) -> its name
    _low: dict[str, str]  # a member's name -> its column's, lower case

    def _read_columns(self, conn: sqlite3.Connection) -> None:
        """The layer's attribute columns as the file has them now."""
        skip = {"fid", *(c.lower() for c in GUARD_NAMES), (self.geom or "").lower()}
        self.columns = {
            str(r[1]).lower(): str(r[1])
            for r in conn.execute(f"PRAGMA table_info({quote(self.layer)})")
            if str(r[1]).lower() not in skip
        }

    def _held(self, conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Held]:
        out: dict[str, Held] = {}
        t, tomb = quote(self.layer), quote(tombstones(self.layer))
        for start in range(0, len(keys), CHUNK):
            part = keys[start : start + CHUNK]
            marks = ", ".join("?" * len(part))
            for r in conn.execute(
                "SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, fl_content_hash, "
                f"fid FROM {t} WHERE fl_key IN ({marks})",
                part,
            ):
                out[r[0]] = Held(int(r[1]), r[2], int(r[3]), r[4], False, int(r[5]))
            for r in conn.execute(
                "SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, fl_content_hash "
                f"FROM {tomb} WHERE fl_key IN ({marks})",
                part,
            ):
                out[r[0]] = Held(int(r[1]), r[2], int(r[3]), r[4], True, None)
        return out

    def _attrs(self, conn: sqlite3.Connection, fid: int | None) -> dict[str, Any] | None:
        if fid is None or not self.columns:
            return None if fid is None else {}
        names = list(self.columns.values())
        row = conn.execute(
            f"SELECT {', '.join(quote(n) for n in names)} FROM {quote(self.layer)} WHERE fid = ?",
            (fid,),
        ).fetchone()
        return {n: v for n, v in zip(names, row or (), strict=False) if v is not None}

    def _put(self, conn: sqlite3.Connection, write: list[Item], held: dict[str, Held]) -> None:
        t, tomb = quote(self.layer), quote(tombstones(self.layer))
        now = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
        live = [i for i in write if not i.deleted]
        gone = [i for i in write if i.deleted]
        self._add_columns(conn, [i.attrs or {} for i in live])
        # the features that move or go: their old boxes (the extent may shrink)
        moved = [held[i.key].fid for i in write if i.key in held and not held[i.key].deleted]
        old_boxes = self._boxes(conn, [f for f in moved if f is not None])
        if gone:
            conn.executemany(f"DELETE FROM {t} WHERE fl_key = ?", [(i.key,) for i in gone])
            conn.executemany(
                f"INSERT INTO {tomb} (fl_key, fl_revision, fl_generation, fl_generation_rank, "
                f"fl_content_hash, fl_written_at) VALUES (?, ?, ?, ?, ?, {now}) "
                "ON CONFLICT (fl_key) DO UPDATE SET fl_revision = excluded.fl_revision, "
                "fl_generation = excluded.fl_generation, "
                "fl_generation_rank = excluded.fl_generation_rank, "
                "fl_content_hash = excluded.fl_content_hash, "
                "fl_written_at = excluded.fl_written_at",
                [(i.key, i.revision, i.generation, i.rank, i.content_hash) for i in gone],
            )
        if live:
            back = [(i.key,) for i in live if i.key in held and held[i.key].deleted]
            if back:
                conn.executemany(f"DELETE FROM {tomb} WHERE fl_key = ?", back)
            attrs = list(self.columns.values())
            lowered = [a.lower() for a in attrs]
            cols = [*([self.geom] if self.geom else []), *GUARD_NAMES[:5], *attrs]
            sets = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in cols if c != "fl_key")
            marks = ", ".join(["?"] * len(cols))
            conn.executemany(
                f"INSERT INTO {t} ({', '.join(quote(c) for c in cols)}, fl_written_at) "
                f"VALUES ({marks}, {now}) ON CONFLICT (fl_key) DO UPDATE SET {sets}, "
                "fl_written_at = excluded.fl_written_at",
                [
                    (
                        *([i.blob] if self.geom else []),
                        i.key, i.revision, i.generation, i.rank, i.content_hash,
                        *map(self._bycolumn(i).get, lowered),
                    )
                    for i in live
                ],
            )  # fmt: skip
        self._contents(conn, live, old_boxes)

    def _bycolumn(self, item: Item) -> dict[str, Any]:
        """The item's values by their column's lower-case name (SQLite's names ignore
        case: members differing only by case share a column, the last one wins)."""
        low = self._low
        return {(low.get(k) or self._lower(k)): value(v) for k, v in (item.attrs or {}).items()}

    def _lower(self, name: str) -> str:
        self._low[name] = got = column(name, self.geom).lower()
        return got

    def _add_columns(self, conn: sqlite3.Connection, records: list[dict[str, Any]]) -> None:
        """Columns for members not seen before, typed by this batch's values."""
        names: set[str] = set().union(*records) if records else set()
        unseen = {n for n in names if (self._low.get(n) or self._lower(n)) not in self.columns}
        if unseen:
            # another writer (the live route beside a rebuild, another process) may have
            # added them since this one read the layer: read again, under the write lock
            self._read_columns(conn)
            unseen = {n for n in unseen if self._low[n] not in self.columns}
        new: dict[str, list[Any]] = {n: [] for n in sorted(unseen)}
        if new:
            for rec in records:
                for name in unseen.intersection(rec):
                    new[name].append(rec[name])
        for name, values in new.items():
            col = column(name, self.geom)
            if col.lower() in self.columns:
                continue
            conn.execute(
                f"ALTER TABLE {quote(self.layer)} ADD COLUMN {quote(col)} {sql_type(values)}"
            )
            self.columns[col.lower()] = col

    def _boxes(self, conn: sqlite3.Connection, fids: list[int]) -> list[tuple[float, ...]]:
        if self.geom is None or not fids:
            return []
        rtree = quote(f"rtree_{self.layer}_{self.geom}")
        out: list[tuple[float, ...]] = []
        for start in range(0, len(fids), CHUNK):
            part = fids[start : start + CHUNK]
            out += conn.execute(
                f"SELECT minx, miny, maxx, maxy FROM {rtree} "
                f"WHERE id IN ({', '.join('?' * len(part))})",
                part,
            ).fetchall()
        return out

    def _contents(
        self, conn: sqlite3.Connection, live: list[Item], old_boxes: list[tuple[float, ...]]
    ) -> None:
        """gpkg_contents: last_change now; the extent grown by the batch, or recomputed
        from the R-tree when an old box touched its edge (it may shrink)."""
        stamp = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
        if self.geom is None:
            conn.execute(
                f"UPDATE gpkg_contents SET last_change = {stamp} "
                "WHERE lower(table_name) = lower(?)",
                (self.layer,),
            )
            return
        cur = conn.execute(
            "SELECT min_x, min_y, max_x, max_y FROM gpkg_contents "
            "WHERE lower(table_name) = lower(?)",
            (self.layer,),
        ).fetchone()
        extent: tuple[Any, ...] | None = None if cur is None or cur[0] is None else tuple(cur)
        edge = extent is not None and any(
            b[0] <= extent[0] or b[1] <= extent[1] or b[2] >= extent[2] or b[3] >= extent[3]
            for b in old_boxes
        )
        if edge or (extent is None and old_boxes):
            rtree = quote(f"rtree_{self.layer}_{self.geom}")
            got = conn.execute(
                f"SELECT min(minx), min(miny), max(maxx), max(maxy) FROM {rtree}"
            ).fetchone()
            extent = None if got is None or got[0] is None else tuple(got)
        else:
            box = union_box([i.blob for i in live])
            if box is not None:
                extent = box if extent is None else (
                    min(extent[0], box[0]), min(extent[1], box[1]),
                    max(extent[2], box[2]), max(extent[3], box[3]),
                )  # fmt: skip
        conn.execute(
            f"UPDATE gpkg_contents SET last_change = {stamp}, min_x = ?, min_y = ?, max_x = ?, "
            "max_y = ? WHERE lower(table_name) = lower(?)",
            (*(extent if extent is not None else (None,) * 4), self.layer),
        )

    def _union_sql(self, columns: str, where: str) -> str:
        t, tomb = quote(self.layer), quote(tombstones(self.layer))
        return (
            f"SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, 0 AS deleted, "
            f"fl_content_hash{columns} FROM {t}{where} UNION ALL "
            f"SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, 1, "
            f"fl_content_hash{columns} FROM {tomb}{where}"
        )
