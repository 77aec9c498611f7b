"""A PostGIS destination's table in SQL terms (sync/kinds/postgis.py): its columns'
names and types (a document member's lower-case column, typed from the JSON values
seen), the primary key from the source's key, the geometry column's type and SRID
from the source's layer, the statement that creates it, and the one that reads a
staged batch's members and geometry types before its upsert.

Types: a member whose values are JSON integers (at most 18 digits) is `bigint`,
numbers `double precision`, booleans `boolean`, objects and arrays `jsonb`, strings
(and anything mixed) `text`. A value that no longer fits its column widens it (bigint
to double precision, anything to text); a column is never narrowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from feedledger.sync.target import ident, literal

# the guard's columns (sync/target.py's names) and the geometry column: a member of
# one of these names gets a leading underscore
GUARD_COLUMNS = (
    "key",
    "revision",
    "generation",
    "generation_rank",
    "content_hash",
    "deleted",
    "written_at",
)
GEOM = "geom"
RESERVED = frozenset((*GUARD_COLUMNS, GEOM, "doc", "geometry_wkb"))

SQL_TYPE = {
    "integer": "bigint",
    "real": "double precision",
    "boolean": "boolean",
    "string": "text",
    "json": "jsonb",
}
# what each column type takes without widening
_TAKES = {
    "bigint": {"integer"},
    "double precision": {"integer", "real"},
    "boolean": {"boolean"},
    "jsonb": {"integer", "real", "boolean", "string", "json"},
    "text": {"integer", "real", "boolean", "string", "json"},
}
_INT_RE = re.compile(r"^-?\d{1,18}$")
_EPSG_RE = re.compile(r"^(?:EPSG|epsg):(\d+)$")
# GeoJSON geometry type (gpkg_file.layer_type's names) -> its WKB type code
WKB_CODE = {
    "Point": 1,
    "LineString": 2,
    "Polygon": 3,
    "MultiPoint": 4,
    "MultiLineString": 5,
    "MultiPolygon": 6,
    "GeometryCollection": 7,
}
_SINGLE_OF = {4: 1, 5: 2, 6: 3}

# a staged batch's members and the kind of each value ('m'), and its geometries' WKB
# type codes ('g': the low 16 bits of the type, read from the bytes, no parse)
STAGED_SHAPE = (
    "SELECT 'm', e.k, CASE jsonb_typeof(e.v) WHEN 'number' THEN CASE WHEN e.v::text ~ "
    "'^-?[0-9]{1,18}$' THEN 'integer' ELSE 'real' END WHEN 'string' THEN 'string' "
    "WHEN 'boolean' THEN 'boolean' WHEN 'null' THEN NULL ELSE 'json' END "
    "FROM fl_stage s, jsonb_each(s.doc::jsonb) e(k, v) "
    "WHERE s.doc IS NOT NULL AND s.doc LIKE '{%' GROUP BY 2, 3 "
    "UNION ALL SELECT DISTINCT 'g', NULL, (CASE get_byte(g, 0) WHEN 1 THEN get_byte(g, 1) + "
    "256 * get_byte(g, 2) ELSE get_byte(g, 4) + 256 * get_byte(g, 3) END)::text "
    "FROM (SELECT geometry_wkb AS g FROM fl_stage WHERE geometry_wkb IS NOT NULL) w"
)


def column_of(member: str) -> str:
    """A document member's column: its name in lower case (what QGIS users expect),
    with a leading underscore if that is one of the table's own columns."""
    low = member.lower()
    return "_" + low if low in RESERVED else low


def kind_of(value: Any) -> str | None:
    """The kind of a JSON value (None for null), as STAGED_SHAPE classifies it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if _INT_RE.match(str(value)) else "real"
    if isinstance(value, float):
        return "real"
    if isinstance(value, str):
        return "string"
    return "json"


def sql_type(kinds: Iterable[str | None]) -> str:
    """The column type of a member whose values are of these kinds."""
    seen = {k for k in kinds if k is not None}
    if len(seen) == 1:
        return SQL_TYPE[next(iter(seen))]
    if seen == {"integer", "real"}:
        return "double precision"
    return "text"


def widened(current: str, kinds: Iterable[str | None]) -> str | None:
    """The type a column of type `current` must become to take values of `kinds`, or
    None if it takes them already."""
    seen = {k for k in kinds if k is not None}
    if seen <= _TAKES.get(current, _TAKES["text"]):
        return None
    if current == "bigint" and seen <= {"integer", "real"}:
        return "double precision"
    return "text"


def value_sql(sql_type_: str, member: str | None) -> str:
    """The expression of a column's value from the staged document `s.doc` (jsonb)."""
    if member is None:
        return "NULL"
    m = literal(member)
    if sql_type_ == "jsonb":
        return f"nullif(s.doc -> {m}, 'null'::jsonb)"
    if sql_type_ == "text":
        return f"(s.doc ->> {m})"
    return f"(s.doc ->> {m})::{sql_type_}"


def srid_of(crs: str | None) -> int | None:
    """The SRID of a source's stated CRS (`EPSG:N`; OGC:CRS84 is 4326's lon/lat, which
    is PostGIS's axis order for 4326 anyway), or None."""
    if crs is None:
        return None
    text = crs.strip()
    if text in ("OGC:CRS84", "urn:ogc:def:crs:OGC:1.3:CRS84"):
        return 4326
    found = _EPSG_RE.match(text)
    return int(found.group(1)) if found else None


def pg_type(layer: str) -> str:
    """The PostGIS type name of a layer type (gpkg_file.layer_type's: `Polygon Z`,
    `Unknown`...): `PolygonZ`, `Geometry`."""
    base, _, z = layer.partition(" ")
    name = "Geometry" if base == "Unknown" else base
    return name + ("Z" if z == "Z" else "")


def allowed(column_type: str) -> set[int] | None:
    """The WKB type codes (mod 1000) a geometry column of PostGIS type `column_type`
    (`MultiPolygon`, `GeometryZ`...) takes, a single part going into its Multi* column
    as a one-part Multi*; None: any."""
    base = column_type.upper().removesuffix("Z").removesuffix("M")
    want = next((c for n, c in WKB_CODE.items() if n.upper() == base), None)
    if want is None:
        return None
    return {want, *([_SINGLE_OF[want]] if want in _SINGLE_OF else [])}


def takes(column_type: str, codes: Iterable[int]) -> bool:
    """Whether a geometry column of that type takes geometries of these WKB codes."""
    ok = allowed(column_type)
    return ok is None or all(c % 1000 in ok for c in codes)


def fits_sql(
    members: dict[str, tuple[str, str]], column_type: str, other: Iterable[str] = ()
) -> str:
    """One row, one boolean: whether every staged document's members are among
    `members` (column -> (member, its SQL type)) with values their columns take, and
    every staged geometry's type is one the geometry column takes -- the common case,
    checked without expanding the documents (STAGED_SHAPE reads the details when not).
    `other`: members known not to be columns (the primary key's, `geometry`)."""
    known = ", ".join(literal(m) for m in [*(m for m, _t in members.values()), *other])
    conds = [f"(d - ARRAY[{known}]::text[]) = '{{}}'::jsonb"]
    for member, type_ in members.values():
        kind = f"coalesce(jsonb_typeof(d -> {literal(member)}), 'null')"
        if type_ == "bigint":
            conds.append(
                f"({kind} = 'null' OR ({kind} = 'number' AND "
                f"(d ->> {literal(member)}) ~ '^-?[0-9]{{1,18}}$'))"
            )
        elif type_ == "double precision":
            conds.append(f"{kind} IN ('null', 'number')")
        elif type_ == "boolean":
            conds.append(f"{kind} IN ('null', 'boolean')")
    docs = f"(d IS NULL OR jsonb_typeof(d) <> 'object' OR ({' AND '.join(conds)}))"
    ok = allowed(column_type)
    geoms = "true"
    if ok is not None:
        code = (
            "(CASE get_byte(g, 0) WHEN 1 THEN get_byte(g, 1) + 256 * get_byte(g, 2) "
            "ELSE get_byte(g, 4) + 256 * get_byte(g, 3) END) % 1000"
        )
        geoms = f"(g IS NULL OR {code} IN ({', '.join(str(c) for c in sorted(ok))}))"
    return (
        f"SELECT coalesce(bool_and({docs} AND {geoms}), true) FROM "
        "(SELECT doc::jsonb AS d, geometry_wkb AS g FROM fl_stage) s"
    )


def pk_of(key_fields: Sequence[str], keys: Sequence[str]) -> tuple[str, str, str] | None:
    """The primary key column of a single-field key: (name, type, expression from the
    canonical key text `key`) -- `bigint` if every key seen is a JSON integer, else
    `text`; None for a compound key (the key text is the primary key then)."""
    if len(key_fields) != 1:
        return None
    ints = bool(keys)
    for k in keys:
        try:
            v = json.loads(k)
        except ValueError:
            ints = False
            break
        if not (isinstance(v, list) and len(v) == 1 and kind_of(v[0]) == "integer"):
            ints = False
            break
    name = column_of(key_fields[0])
    if ints:
        return name, "bigint", "((key::jsonb ->> 0)::bigint)"
    return name, "text", "(key::jsonb ->> 0)"


def create_sql(
    table: str,
    pk: tuple[str, str, str] | None,
    columns: dict[str, str],
    geom_type: str,
    srid: int,
) -> list[str]:
    """The table: the primary key, the attribute columns, `geom` with its GiST index,
    the guard's columns."""
    t = ident(table)
    parts = []
    if pk is not None:
        name, type_, expr = pk
        parts.append(f"{ident(name)} {type_} GENERATED ALWAYS AS {expr} STORED PRIMARY KEY")
    parts += [f"{ident(c)} {type_}" for c, type_ in columns.items()]
    parts.append(f"{GEOM} geometry({geom_type}, {int(srid)})")
    parts.append("key text NOT NULL " + ("UNIQUE" if pk is not None else "PRIMARY KEY"))
    parts += [
        "revision bigint NOT NULL",
        "generation text NOT NULL",
        "generation_rank bigint NOT NULL",
        "content_hash text NOT NULL",
        "deleted boolean NOT NULL DEFAULT false",
        "written_at bigint NOT NULL DEFAULT (extract(epoch from clock_timestamp()) * "
        "1000000)::bigint",
    ]
    return [
        f"CREATE TABLE {t} ({', '.join(parts)})",
        f"CREATE INDEX {ident(table[:58] + '_geom')} ON {t} USING gist ({GEOM})",
    ]


def evidence_sql(table: str) -> str:
    """The held row's attributes as JSON text (an unresolved verdict's evidence)."""
    drop = ", ".join(literal(c) for c in (*GUARD_COLUMNS, GEOM))
    return f"(to_jsonb({ident(table)}) - ARRAY[{drop}])::text"
