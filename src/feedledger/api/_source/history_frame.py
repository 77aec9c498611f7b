"""`Source.history_frame`: entities' versions as one polars DataFrame with typed
columns, what an analyst builds first (`Version.to_json()` keeps the JSON texts as
`RawJSON`, the CLI's `--json`; a frame of those would be object columns).

Columns: `key` (the key value as text; a compound key's JSON array), `valid_from`,
`valid_to`, `recorded_at`, `retracted_at` (Datetime µs UTC, null where none),
`run_id`, `payload_id` (String), `backfill`, `deleted` (Boolean), `change` (String: a
`ChangeKind` value), `revision` (String), then one String column per attribute (the
key fields first, then the others by name; each value as the snapshot writes it: a
string as itself, a number as its literal text, objects and arrays as JSON, null for a
tombstone or a record without the field; an attribute named like one of the columns
above is `attributes.<name>`), and for a GIS source `geometry` (ISO WKB, Binary; null
for a tombstone or a feature without one)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from feedledger.model.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

    from feedledger.api.results import Version

META = (
    "key",
    "valid_from",
    "valid_to",
    "recorded_at",
    "retracted_at",
    "run_id",
    "payload_id",
    "backfill",
    "deleted",
    "change",
    "revision",
)


def keys_asked(source: str, key: Any, keys: Any) -> list[Any]:
    """The keys of `Source.history_frame(key)` or `(keys=[...])`: exactly one of the two
    (ConfigError), `keys` a list, not a text (TypeError)."""
    if (key is None) == (keys is None):
        raise ConfigError("history_frame: give one key, or keys=[...]", source=source)
    if keys is not None and (isinstance(keys, str | bytes) or not isinstance(keys, Iterable)):
        # a text is iterable too: keys="0714-22-1" would read the keys "0", "7"...
        raise TypeError(
            f"history_frame: keys must be a list of keys (keys=[...]), "
            f"not {type(keys).__name__} {keys!r}; one key is history_frame(key)"
        )
    return [key] if keys is None else list(keys)


def frame(versions: Sequence[Version], key_fields: Sequence[str], *, geo: bool) -> pl.DataFrame:
    """The versions (each a `Version` the API returned, its stored record kept) as one
    DataFrame, in the given order."""
    import polars as pl  # lazy: keeps `import feedledger.api` light
    import pyarrow as pa  # lazy: as polars

    from feedledger.ledger.encoding.columns import (  # lazy: SQLAlchemy, Arrow
        fields_of,
        text_columns,
        value_text,
    )

    raws = [v._raw for v in versions]
    stamp = pa.timestamp("us", tz="UTC")
    cols: dict[str, pa.Array] = {
        "key": pa.array([_key_text(r.key, value_text) for r in raws], pa.string()),
        "valid_from": pa.array([r.valid_from for r in raws], pa.int64()).cast(stamp),
        "valid_to": pa.array([r.valid_to for r in raws], pa.int64()).cast(stamp),
        "recorded_at": pa.array([r.recorded_at for r in raws], pa.int64()).cast(stamp),
        "retracted_at": pa.array([r.retracted_at for r in raws], pa.int64()).cast(stamp),
        "run_id": pa.array([r.run_id for r in raws], pa.string()),
        "payload_id": pa.array([r.payload_id for r in raws], pa.string()),
        "backfill": pa.array([bool(r.backfill) for r in raws], pa.bool_()),
        "deleted": pa.array([bool(r.deleted) for r in raws], pa.bool_()),
        "change": pa.array([str(r.change) for r in raws], pa.string()),
        "revision": pa.array([r.revision for r in raws], pa.string()),
    }
    texts = [r.attributes if r.attributes is not None else "{}" for r in raws]
    seen = dict.fromkeys(n for t in dict.fromkeys(texts) for n in fields_of(t))
    names = [f for f in key_fields if f in seen] + sorted(n for n in seen if n not in key_fields)
    values = text_columns(pa.array(texts, pa.string()), names) if names else []
    for name, column in zip(names, values, strict=True):
        cols[f"attributes.{name}" if name in META else name] = column
    if geo:
        cols["geometry"] = _wkb([r.geometry for r in raws], [r.key for r in raws])
    found = pl.from_arrow(pa.table(cols))
    assert isinstance(found, pl.DataFrame)
    return found


def _key_text(key: str, value_text: Any) -> str:
    """A stored key (a JSON array text) as the CLI takes it: the value of a single key,
    the JSON array of a compound one."""
    from feedledger.formats.canonical import RawNumber  # lazy: polars

    values = json.loads(key, parse_float=RawNumber, parse_int=RawNumber)
    if len(values) == 1:
        return str(value_text(values[0]))
    return key


def _wkb(geometries: list[str | None], keys: list[str]) -> Any:
    """GeoJSON texts as stated -> ISO WKB (Arrow binary), null kept."""
    import numpy as np  # lazy: GIS sources only
    import pyarrow as pa  # lazy: as numpy
    import shapely  # lazy: as numpy

    texts = [g if g and g != "null" else None for g in geometries]
    try:
        shapes = shapely.from_geojson(np.array(texts, dtype=object))
    except shapely.errors.GEOSException:
        for key, text in zip(keys, texts, strict=True):  # name the one at fault
            try:
                shapely.from_geojson(text)
            except shapely.errors.GEOSException as exc:
                raise ConfigError(
                    f"entity {json.loads(key)}: its stored geometry cannot be written as "
                    f"WKB ({' '.join(str(exc).split())})",
                    hint="`history` gives each geometry as stated",
                ) from None
        raise
    return pa.array(shapely.to_wkb(shapes, flavor="iso"), pa.binary())
