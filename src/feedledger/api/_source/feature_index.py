"""A layer's spatial index in memory: what an OGC API items page chooses its keys from.

One index per state of a source -- (store, source, the watermark's commit sequence,
the publisher time the state stands from, known-at) -- built once from
`ledger.readers.snapshot_rows.layer_rows` (keys, the valid_from of the version in
force, the geometry text; never the attributes), a batch at a time: each batch's
geometry texts give only their envelopes (`envelopes`: read off the numbers of the
ledger's own compact GeoJSON, shapely for any other) and are dropped.
What is kept per entity is its key (in the store's key order), its valid_from, its
envelope (four float64, NaN without a geometry) and its place in minx order: ~60
bytes and the key's text, about 70 MB for 1M parcels. A page is then a binary search
and a vectorised test over those arrays (the bbox, the interval's start) and a slice:
no page reads the layer again.

A payload applied, a retraction or a replay moves the sequence on: the next request
sees another key and builds again (never patched). At most `MAX_INDEXES` states are
held per process, the least recently used dropped first; two requests for a state not
yet built build it once (the second waits for the first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

MAX_INDEXES = 4

Bbox = tuple[float, float, float, float]
IndexKey = tuple[str, str, int, int, int | None]


@dataclass(frozen=True, slots=True)
class LayerIndex:
    """The entities present in one state of a layer: keys in key order, each one's
    valid_from (UTC microseconds) and envelope (`minx`, `miny`, `maxx`, `maxy`; NaN:
    no geometry); and for the bbox test, the entities ordered by `minx` (`by_minx`,
    `minx_sorted`) and the widest envelope (`widest`)."""

    keys: pa.Array
    valid_from: npt.NDArray[np.int64]
    minx: npt.NDArray[np.float64]
    miny: npt.NDArray[np.float64]
    maxx: npt.NDArray[np.float64]
    maxy: npt.NDArray[np.float64]
    by_minx: npt.NDArray[np.int64]
    minx_sorted: npt.NDArray[np.float64]
    widest: float

    @property
    def count(self) -> int:
        return len(self.keys)

    def extent(self) -> Bbox | None:
        """The envelope of every geometry in the state; None if there is none."""
        import numpy as np  # lazy: as the module's other readers

        if not self.count or bool(np.isnan(self.minx).all()):
            return None
        return (
            float(np.nanmin(self.minx)),
            float(np.nanmin(self.miny)),
            float(np.nanmax(self.maxx)),
            float(np.nanmax(self.maxy)),
        )

    def select(
        self, bbox: Bbox | None, since: int | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        """(how many entities match, the keys of the matches offset..offset+limit, in
        key order). `bbox` (minx, miny, maxx, maxy; minx > maxx crosses the
        antimeridian) keeps the entities whose envelope intersects it (none without a
        geometry); `since` those whose version in force began at or after it."""
        import numpy as np  # lazy: as the module's other readers

        if bbox is None and since is None:
            matched = self.count
            picked = self.keys.slice(min(offset, matched), max(0, min(limit, matched - offset)))
            return matched, [str(k) for k in picked.to_pylist()]
        if bbox is not None:
            found = self._in_bbox(bbox)
            if since is not None:
                found = found[self.valid_from[found] >= since]
        else:
            assert since is not None
            found = np.flatnonzero(self.valid_from >= since)
        chosen = found[offset : offset + limit]
        return len(found), [str(k) for k in self.keys.take(chosen).to_pylist()]

    def _in_bbox(self, bbox: Bbox) -> npt.NDArray[np.int64]:
        """The positions (ascending: key order) of the entities whose envelope
        intersects `bbox`. An entity can intersect only if its minx lies in
        [x0 - widest, x1]: that run of `by_minx` is found by binary search and only
        it is tested (the whole layer when `bbox` crosses the antimeridian)."""
        import numpy as np  # lazy: as the module's other readers

        x0, y0, x1, y1 = bbox
        if x0 <= x1:
            lo = int(np.searchsorted(self.minx_sorted, x0 - self.widest, side="left"))
            hi = int(np.searchsorted(self.minx_sorted, x1, side="right"))
            cand = self.by_minx[lo:hi]
            keep = (self.maxx[cand] >= x0) & (self.maxy[cand] >= y0) & (self.miny[cand] <= y1)
            return np.sort(cand[keep])
        # across the antimeridian: [x0, 180] and [-180, x1]
        keep = (self.maxx >= x0) | (self.minx <= x1)
        keep &= (self.maxy >= y0) & (self.miny <= y1)
        return np.flatnonzero(keep)


def build(batches: Iterable[pa.RecordBatch]) -> LayerIndex:
    """The index of the state `batches` (`key`, `valid_from`, `geometry`) stream."""
    import numpy as np  # lazy: `import feedledger` stays light
    import pyarrow as pa  # lazy: as numpy

    from feedledger.api._source.envelopes import envelopes  # lazy: as numpy

    keys: list[pa.Array] = []
    froms: list[npt.NDArray[np.int64]] = []
    bounds: list[npt.NDArray[np.float64]] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        keys.append(batch.column(0))
        froms.append(batch.column(1).to_numpy(zero_copy_only=False).astype(np.int64))
        bounds.append(envelopes(batch.column(2)))
    if not keys:
        return _index(pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros((0, 4)))
    made = _index(pa.concat_arrays(keys), np.concatenate(froms), np.concatenate(bounds))
    # the scan's batches (their geometry texts) go back to the system, not kept by
    # Arrow's allocator for a next scan that may never come
    del keys, froms, bounds
    pa.default_memory_pool().release_unused()
    return made


def _index(
    keys: pa.Array, froms: npt.NDArray[np.int64], bounds: npt.NDArray[np.float64]
) -> LayerIndex:
    import numpy as np  # lazy: as `build`

    minx, miny, maxx, maxy = (np.ascontiguousarray(bounds[:, i]) for i in range(4))
    by_minx = np.argsort(minx, kind="stable")  # (NaN last: never in a bbox's run)
    widths = maxx - minx
    widest = float(np.nanmax(widths)) if len(widths) and not np.isnan(widths).all() else 0.0
    return LayerIndex(keys, froms, minx, miny, maxx, maxy, by_minx, minx[by_minx], widest)


class _Cache:
    def __init__(self, size: int) -> None:
        self.size = size
        self.held: OrderedDict[IndexKey, LayerIndex] = OrderedDict()
        self.lock = threading.Lock()
        self.building: dict[IndexKey, threading.Lock] = {}
        self.builds = 0  # how many indexes were built (the tests count them)

    def get(self, key: IndexKey, make: Callable[[], LayerIndex]) -> LayerIndex:
        with self.lock:
            found = self.held.get(key)
            if found is not None:
                self.held.move_to_end(key)
                return found
            gate = self.building.setdefault(key, threading.Lock())
        with gate:
            with self.lock:
                found = self.held.get(key)
            if found is not None:
                return found
            made = make()
            with self.lock:
                self.builds += 1
                self.held[key] = made
                self.held.move_to_end(key)
                while len(self.held) > self.size:
                    self.held.popitem(last=False)
                self.building.pop(key, None)
            return made

    def clear(self) -> None:
        with self.lock:
            self.held.clear()


CACHE = _Cache(MAX_INDEXES)
