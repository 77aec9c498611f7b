"""A PostGIS table as a destination: the layer a QGIS user opens from PostgreSQL.

The table (sync/kinds/postgis_schema.py): a primary key from the source's key (a
single-field key's value, `bigint` if every key is an integer, else `text`, generated
from the guard's key; a compound key's canonical text), the document's members as
typed lower-case columns, `geom geometry(<type>, <srid>)` typed from the source's layer
(its geometry types and CRS in the ledger, as the GeoPackage kind learns them) with a
GiST index, and the guard's columns (`key`, `revision`, `generation`,
`generation_rank`, `content_hash`, `deleted`, `written_at`).

It IS the PostgreSQL table destination (sync/target.py) with typed columns: the same
binary COPY of each batch into the staging table (the geometry as the version's WKB,
a bytea), the same hash-first probing and ONE guarded statement per batch
(sync/pg_batch.py); only the upsert's SELECT differs: each column's value from the
staged document, and the geometry made by PostGIS from the staged bytes
(`ST_GeomFromWKB` with the SRID; `ST_Transform` when `--srid` asked for another CRS
than the source's; `ST_Multi` into a Multi* column; 2-D unless the layer has Z).
Tombstones are rows like the table's: `deleted` true, the attributes and `geom` NULL
(a QGIS layer filter `NOT deleted` shows present features only).

Before a batch's upsert, in its transaction, one statement reads the staged members'
value kinds and geometry types (postgis_schema.STAGED_SHAPE): a member not seen yet
becomes a column, a value that does not fit its column widens it, a geometry type
the column does not take makes it `geometry(Geometry, srid)`. Nothing is dropped or
silently cast. The rebuild takes one batch at a time (`writers = 1`), so its batches
never wait on each other's schema changes.

A source without geometry is refused: its destination is the PostgreSQL table
(`--postgres`), which this kind would only copy without a geometry column.
"""

from __future__ import annotations

import json
from typing import Any

from feedledger.ledger.store import Store, payload_crs
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError, StoreUnavailableError
from feedledger.sync.guard import GUARD
from feedledger.sync.kinds import postgis_schema as schema
from feedledger.sync.pg_batch import Batches
from feedledger.sync.target import COLUMNS, Target, ident

_NOW = "(extract(epoch from clock_timestamp()) * 1000000)::bigint"
_STAGED = ", ".join((*COLUMNS, "geometry_wkb"))


class PostGIS(Target):
    writers = 1

    def __init__(
        self,
        dest: Destination,
        *,
        geo: bool = False,
        store: Store | None = None,
        key: tuple[str, ...] = (),
        srid: int | None = None,
    ) -> None:
        super().__init__(dest, geo=True)
        self.is_geo = geo
        self.store = store
        self.key_fields = key
        self.asked_srid = srid  # --srid, when declared
        self.writers = 1
        self.batches = Batches(
            self.engine,
            self.ident,
            self.columns,
            self._upsert_sql,
            prepare=self._prepare,
            doc_sql=schema.evidence_sql(self.table),
        )
        self.srid = 0  # the geom column's
        self.geom_type = "Geometry"
        self.source_srid: int | None = None  # the source's (a transform when it differs)
        self.attrs: dict[str, str] = {}  # attribute column -> its SQL type
        self.generated: set[str] = set()  # the primary key's generated column
        self.members: dict[str, str] = {}  # column -> the member it is read from
        self.other = {"geometry"}  # members not read into a column (the key's, geometry)

    # -- the table ------------------------------------------------------------------------
    def ensure(self) -> None:
        if not self.is_geo:
            raise ConfigError(
                f"destination {self.dest.name}: source {self.dest.source} has no geometry; "
                "a PostGIS destination is a GIS source's layer",
                hint="use --postgres URL --table T for a table of its records",
            )
        try:
            raw = self.engine.raw_connection()
            try:
                cur = raw.cursor()
                self._check_postgis(cur)
                cur.execute("SELECT to_regclass(%s) IS NOT NULL", (self.ident,))
                exists = bool((cur.fetchone() or (False,))[0])
            finally:
                raw.close()
        except (ConfigError, StoreUnavailableError):
            raise
        except Exception as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise StoreUnavailableError(
                f"cannot reach destination {self.dest.name}: "
                f"{reason[0] if reason else type(exc).__name__}"
            ) from None
        with self._mapped():
            if not exists:
                self._create()
            raw = self.engine.raw_connection()
            try:
                self._read(raw.cursor())
                if exists and self.geom_type.startswith("Geometry") and self.store is not None:
                    self._retype(raw)
            finally:
                raw.close()
        if self.asked_srid is not None and self.asked_srid != self.srid:
            raise ConfigError(
                f"destination table {self.table} exists with SRID {self.srid}, not "
                f"{self.asked_srid}",
                hint="choose another --table, or drop that table",
            )
        self.source_srid = self._source_srid()

    def _check_postgis(self, cur: Any) -> None:
        cur.execute(
            "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'postgis'), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'postgis')"
        )
        got = cur.fetchone()
        if got[0] is not None:
            return
        if got[1]:
            raise ConfigError(
                f"destination {self.dest.name}: the database has no PostGIS extension",
                hint="run CREATE EXTENSION postgis; in it (as its owner or a superuser)",
            )
        raise ConfigError(
            f"destination {self.dest.name}: the PostgreSQL server has no PostGIS",
            hint="install it on the server (Debian: postgresql-15-postgis-3), then "
            "CREATE EXTENSION postgis; in the database",
        )

    def _source_srid(self) -> int | None:
        if self.store is None:
            return None
        wm = self.store.watermark(self.dest.source)
        if wm is None or not wm.payload_id:
            return None
        return schema.srid_of(payload_crs(self.store, wm.payload_id))

    def _create(self) -> None:
        """The table, typed from the source's current state in the ledger."""
        from feedledger.sync.kinds.gpkg_file import layer_type  # lazy: a new table only
        from feedledger.sync.versions import attribute_sample, geometry_types  # lazy: as above

        srid, layer, sample = self.asked_srid, "Unknown", list[tuple[str, str]]()
        if self.store is not None:
            layer = layer_type(geometry_types(self.store, self.dest.source))
            sample = attribute_sample(self.store, self.dest.source)
            if srid is None:
                srid = self._source_srid()
        pk = schema.pk_of(self.key_fields, [k for k, _ in sample])
        kinds: dict[str, set[str | None]] = {}
        for _key, attrs in sample:
            body = schema_json(attrs)
            for member, value in body.items():
                if member == "geometry":
                    continue
                kinds.setdefault(schema.column_of(member), set()).add(schema.kind_of(value))
        if pk is not None:
            kinds.pop(pk[0], None)
        columns = {c: schema.sql_type(k) for c, k in sorted(kinds.items())}
        ddl = schema.create_sql(self.table, pk, columns, schema.pg_type(layer), srid or 0)
        raw = self.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            cur.execute("SELECT to_regclass(%s)", (self.ident,))
            if (cur.fetchone() or (None,))[0] is None:
                for stmt in ddl:
                    cur.execute(stmt)
            raw.commit()
        finally:
            raw.close()

    def _retype(self, raw: Any) -> None:
        """A generic geometry column of a table that holds no geometry yet (declared
        before the source's first payload) typed from the source's layer now."""
        from feedledger.sync.kinds.gpkg_file import layer_type  # lazy: rarely
        from feedledger.sync.versions import geometry_types  # lazy: as above

        cur = raw.cursor()
        cur.execute(f"SELECT EXISTS (SELECT 1 FROM {self.ident} WHERE {schema.GEOM} IS NOT NULL)")
        if (cur.fetchone() or (True,))[0]:
            return
        layer = layer_type(geometry_types(self.store, self.dest.source))  # type: ignore[arg-type]
        srid = self.srid or self._source_srid() or 0
        kind = schema.pg_type(layer)
        if kind == self.geom_type and srid == self.srid:
            return
        cur.execute(
            f"ALTER TABLE {self.ident} ALTER COLUMN {schema.GEOM} TYPE geometry({kind}, {srid}) "
            f"USING ST_SetSRID({schema.GEOM}, {srid})"
        )
        raw.commit()
        self._read(cur)

    def _read(self, cur: Any) -> None:
        """The table's geometry column (type, SRID) and attribute columns, as they are."""
        cur.execute(
            "SELECT type, srid, coord_dimension FROM geometry_columns WHERE "
            "f_table_schema = current_schema() AND f_table_name = %s AND "
            "f_geometry_column = %s",
            (self.table, schema.GEOM),
        )
        geom = cur.fetchone()
        cur.execute(
            "SELECT column_name, data_type, is_generated FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (self.table,),
        )
        found = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
        missing = [c for c in schema.GUARD_COLUMNS if c not in found]
        if geom is None or missing:
            what = ", ".join(missing + ([] if geom is not None else ["geom (a geometry)"]))
            raise ConfigError(
                f"destination table {self.table} exists with an incompatible schema: no "
                f"column(s) {what} (found: {', '.join(sorted(found))})",
                hint="choose another --table, or drop that table",
            )
        kind, srid, dims = str(geom[0]), int(geom[1]), int(geom[2])
        self.geom_type = _TYPE_NAMES.get(kind.upper().removesuffix("Z"), "Geometry") + (
            "Z" if dims >= 3 else ""
        )
        self.srid = srid
        skip = {*schema.GUARD_COLUMNS, schema.GEOM}
        self.generated = {c for c, (_t, g) in found.items() if g == "ALWAYS"}
        self.attrs = {
            c: t for c, (t, _g) in found.items() if c not in skip and c not in self.generated
        }

    # -- the guarded statement ------------------------------------------------------------
    def _prepare(self, cur: Any) -> None:
        """The staged batch's members and geometry types against the table: new
        columns added, columns widened, the geometry column made generic if it must.
        First the common case in one cheap row (every member known, every value and
        geometry fitting); the details only when not."""
        known = {c: (m, self.attrs[c]) for c, m in self.members.items() if c in self.attrs}
        if known:
            cur.execute(schema.fits_sql(known, self.geom_type, self.other))
            if (cur.fetchone() or (False,))[0]:
                return
        cur.execute(schema.STAGED_SHAPE)
        kinds: dict[str, set[str | None]] = {}
        names: dict[str, str] = {}
        codes: set[int] = set()
        for tag, member, kind in cur.fetchall():
            if tag == "g":
                codes.add(int(kind))
                continue
            column = schema.column_of(member)
            if member == "geometry" or column in self.generated:
                self.other.add(member)
                continue
            names.setdefault(column, member)
            kinds.setdefault(column, set()).add(kind)
        for column, member in names.items():
            self.members.setdefault(column, member)
        change = any(
            c not in self.attrs or schema.widened(self.attrs[c], k) is not None
            for c, k in kinds.items()
        ) or not schema.takes(self.geom_type, codes)
        if not change:
            return
        # under the table's lock, from the table as it is now (another writer's change)
        cur.execute(f"LOCK TABLE {self.ident} IN SHARE ROW EXCLUSIVE MODE")
        self._read(cur)
        for column, k in sorted(kinds.items()):
            if column not in self.attrs:
                cur.execute(
                    f"ALTER TABLE {self.ident} ADD COLUMN IF NOT EXISTS {ident(column)} "
                    f"{schema.sql_type(k)}"
                )
            elif (wider := schema.widened(self.attrs[column], k)) is not None:
                cur.execute(
                    f"ALTER TABLE {self.ident} ALTER COLUMN {ident(column)} TYPE {wider} "
                    f"USING {ident(column)}::{wider}"
                )
        if not schema.takes(self.geom_type, codes):
            generic = "GeometryZ" if self.geom_type.endswith("Z") else "Geometry"
            cur.execute(
                f"ALTER TABLE {self.ident} ALTER COLUMN {schema.GEOM} TYPE "
                f"geometry({generic}, {self.srid})"
            )
        self._read(cur)

    def _geometry_sql(self) -> str:
        wkb = "s.geometry_wkb"
        if self.source_srid and self.srid and self.source_srid != self.srid:
            made = f"ST_Transform(ST_GeomFromWKB({wkb}, {self.source_srid}), {self.srid})"
        else:
            made = f"ST_GeomFromWKB({wkb}, {self.srid})"
        made = f"ST_Force3D({made})" if self.geom_type.endswith("Z") else f"ST_Force2D({made})"
        if self.geom_type.upper().startswith("MULTI"):
            made = f"ST_Multi({made})"
        return made

    def _upsert_sql(self, source: str) -> str:
        """The guarded upsert of the staged rows `source` selects (in sync/target.py's
        COLUMNS order and the geometry's bytes), each column's value from them."""
        attrs = sorted(self.attrs)
        cols = [*(ident(c) for c in attrs), schema.GEOM, *COLUMNS[:6]]
        values = [
            *(schema.value_sql(self.attrs[c], self.members.get(c)) for c in attrs),
            self._geometry_sql(),
            *(f"s.{c}" for c in COLUMNS[:6]),
        ]
        sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "key")
        return (
            f"INSERT INTO {self.ident} AS t ({', '.join(cols)}) SELECT {', '.join(values)} "
            f"FROM ({source}) s ({_STAGED}) "
            f"ON CONFLICT (key) DO UPDATE SET {sets}, written_at = {_NOW} WHERE {GUARD}"
        )


_TYPE_NAMES = {n.upper(): n for n in (*schema.WKB_CODE, "Geometry")}


def schema_json(attrs: str) -> dict[str, Any]:
    """A sampled attribute text as a dict (anything but a JSON object: no members)."""
    try:
        body = json.loads(attrs)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
