"""The envelopes (minx, miny, maxx, maxy) of a column of GeoJSON geometry texts, for a
layer's spatial index (`feature_index.build`).

Parsing each text into a geometry (`shapely.from_geojson`) only to take its bounds cost
~10 CPU s per 1M parcel polygons: two thirds of building a layer's index. The texts the
ledger holds are shapely's own compact GeoJSON (formats/observations.py, geo_pages.py):
`{"type":"Polygon","coordinates":[[[x,y],...]]}`. For a text of exactly that shape --
one of the six coordinate types, two numbers per position, plain decimals -- the
envelope is the min and max of its even and odd numbers: found here over the whole
column's bytes at once (numpy masks, one Arrow cast of the numbers). Every other text
(a collection, a third coordinate, an exponent, anything unexpected) goes to shapely as
before, so the result equals `shapely.bounds(shapely.from_geojson(texts))` (tested
against it: tests/api/test_layer_envelopes.py). Nulls and empty geometries: NaN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

_TYPES = ("Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon")
_NUMBER = b"0123456789.-"
_SHAPE = b"0123456789.-,[]"  # what may follow a fast text's prefix, before its closing brace


def envelopes(texts: pa.StringArray) -> npt.NDArray[np.float64]:
    """An (n, 4) array of each text's envelope (NaN: null, empty or no geometry)."""
    import numpy as np  # lazy: `import feedledger` stays light
    import pyarrow as pa  # lazy: as numpy
    import pyarrow.compute as pc  # lazy: as numpy

    texts = pc.cast(texts, pa.string())
    n = len(texts)
    out = np.full((n, 4), np.nan)
    if n == 0:
        return out
    fast = _plain_rows(texts)
    if fast.all():  # the ledger's own texts: no row to set apart
        return _from_numbers(texts)
    slow = np.flatnonzero(~fast & texts.is_valid().to_numpy(zero_copy_only=False))
    if len(slow):
        out[slow] = _by_shapely(texts.take(pa.array(slow)))
    picked = np.flatnonzero(fast)
    if len(picked):
        out[picked] = _from_numbers(texts.take(pa.array(picked)))
    return out


def _by_shapely(texts: pa.StringArray) -> npt.NDArray[np.float64]:
    import shapely  # lazy: as numpy

    found: npt.NDArray[np.float64] = shapely.bounds(
        shapely.from_geojson(texts.to_numpy(zero_copy_only=False), on_invalid="ignore")
    )
    return found


def _plain_rows(texts: pa.StringArray) -> npt.NDArray[np.bool_]:
    """The rows whose text is `{"type":"<T>","coordinates":` + only numbers, commas and
    brackets + `}`, with plain decimals (no exponent) and two numbers per position."""
    import numpy as np  # lazy: as `envelopes`
    import pyarrow.compute as pc  # lazy: as `envelopes`

    n = len(texts)
    fast = np.zeros(n, bool)
    others = np.zeros(n, np.int64)  # bytes of each row a fast text has beside its shape
    for kind in _TYPES:
        prefix = f'{{"type":"{kind}","coordinates":'
        hit = pc.starts_with(texts, prefix).fill_null(False).to_numpy(zero_copy_only=False)
        fast |= hit
        others[hit] = sum(c not in _SHAPE for c in prefix.encode()) + 1  # and the `}`
    fast &= pc.ends_with(texts, "}").fill_null(False).to_numpy(zero_copy_only=False)
    if not fast.any():
        return fast
    data, offs = _bytes(texts)
    fast &= _per_row(np.flatnonzero(~_table(_SHAPE)[data]), offs) == others
    # two numbers per position: as many numbers as twice the innermost `[`s
    starts, _ends = _numbers(data)
    following = np.full_like(data, ord("]"))
    following[:-1] = data[1:]
    innermost = np.flatnonzero((data == ord("[")) & _table(_NUMBER)[following])
    fast &= _per_row(starts, offs) == 2 * _per_row(innermost, offs)
    return fast


def _from_numbers(texts: pa.StringArray) -> npt.NDArray[np.float64]:
    """Envelopes of texts `_plain_rows` accepted: every number cut out of the column's
    bytes as one Arrow string column (the numbers' bytes packed), cast to float64 at
    once; x at even places, y at odd, reduced per row."""
    import numpy as np  # lazy: as `envelopes`
    import pyarrow as pa  # lazy: as `envelopes`

    data, offs = _bytes(texts)
    starts, ends = _numbers(data)
    counts = _per_row(starts, offs)
    packed = data[_table(_NUMBER)[data]]
    token_offsets = np.concatenate(([0], np.cumsum(ends - starts)))
    strings = pa.LargeStringArray.from_buffers(
        len(starts), pa.py_buffer(token_offsets), pa.py_buffer(packed)
    )
    values = strings.cast(pa.float64()).to_numpy(zero_copy_only=False)
    out = np.full((len(texts), 4), np.nan)
    has = counts > 0
    where = (np.cumsum(counts) - counts)[has] // 2  # each row's first position
    xs, ys = values[0::2], values[1::2]
    out[has, 0] = np.minimum.reduceat(xs, where)
    out[has, 1] = np.minimum.reduceat(ys, where)
    out[has, 2] = np.maximum.reduceat(xs, where)
    out[has, 3] = np.maximum.reduceat(ys, where)
    return out


def _table(chars: bytes) -> npt.NDArray[np.bool_]:
    import numpy as np  # lazy: as `envelopes`

    found = np.zeros(256, bool)
    found[np.frombuffer(chars, np.uint8)] = True
    return found


def _bytes(texts: pa.StringArray) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The column's UTF-8 bytes and each row's offsets into them (n + 1)."""
    import numpy as np  # lazy: as `envelopes`
    import pyarrow as pa  # lazy: as `envelopes`

    if not isinstance(texts, pa.LargeStringArray):
        texts = texts.cast(pa.large_string())
    offsets = np.frombuffer(texts.buffers()[1], np.int64, len(texts) + 1, texts.offset * 8)
    data = np.frombuffer(texts.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
    return data, offsets - offsets[0]


def _numbers(data: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Where each run of number bytes (digits, `.`, `-`) starts and ends (exclusive)."""
    import numpy as np  # lazy: as `envelopes`

    inside = np.concatenate(([False], _table(_NUMBER)[data], [False]))
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    return edges[0::2], edges[1::2]


def _per_row(
    positions: npt.NDArray[np.int64], offs: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """How many of the (sorted) byte `positions` fall in each row."""
    import numpy as np  # lazy: as `envelopes`

    counted: npt.NDArray[np.int64] = np.diff(np.searchsorted(positions, offs))
    return counted
