"""Local cache of a source's diff state (key, version id, content hash, revision,
deleted), so a daily ingest loads it in one memory-mapped columnar read.

The cache is derived and disposable. Its file name carries the store id and the
watermark's commit sequence it was taken at; it is used only when both match the
store, so a crash between commit and cache write, another worker's run, a
retraction or a different store all simply fall back to recomputing the state from
`versions` (the latest non-retracted version per key) in one columnar read.

The resident tier: a long-lived process (the scheduler, a long backfill or replay) also
keeps the frames in memory between payloads (`WarmStates`), under the same key and the
same rule: a frame is used only when the store's id and the source's watermark
sequence, read again before each use, are the ones it was committed at. A payload
applied by another process, a retraction or a replay moves the sequence on, and the
frame is dropped and reloaded, never patched. At most `max_sources` sources are held,
the least recently used dropped first; what is held is counted in bytes (`summary`).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from feedledger.diff import STATE_SCHEMA, empty_state
from feedledger.ledger.stateparts import StoredState, open_stored, write_parts

if TYPE_CHECKING:
    from feedledger.ledger.records import Watermark
    from feedledger.ledger.store import Store


DEFAULT_MAX_SOURCES = 8
# A state file this large (a source of more than some thousands of keys, ~60 bytes a
# key) is mapped, not copied: its frame refers to the file's pages (a 10M-key state:
# ~0.6 GiB mapped where a copying read peaked at ~1.3 GiB; a 1M-key one: ~0.002 CPU s
# where the copy took 0.06-0.09, bench/README.md); tiny ones are read whole
MAP_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class WarmEntry:
    source: str
    store_id: int
    seq: int
    frame: pl.DataFrame
    nbytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "commit_seq": self.seq,
            "rows": self.frame.height,
            "bytes": self.nbytes,
        }


class WarmStates:
    """A bounded, thread-safe LRU of source -> WarmEntry (one entry per source)."""

    def __init__(self, max_sources: int = DEFAULT_MAX_SOURCES) -> None:
        if max_sources < 0:
            raise ValueError(f"max warm sources must be 0 or more, not {max_sources}")
        self.max_sources = max_sources
        self._entries: OrderedDict[str, WarmEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.reloads = 0  # held, but for another sequence or store: dropped, reloaded
        self.misses = 0  # not held at all
        self.evictions = 0

    def get(self, source: str, store_id: int, seq: int) -> pl.DataFrame | None:
        """The frame held for exactly (store_id, seq), else None (a stale entry goes)."""
        with self._lock:
            entry = self._entries.get(source)
            if entry is None:
                self.misses += 1
                return None
            if entry.store_id != store_id or entry.seq != seq:
                del self._entries[source]
                self.reloads += 1
                return None
            self._entries.move_to_end(source)
            self.hits += 1
            return entry.frame

    def put(self, source: str, store_id: int, seq: int, frame: pl.DataFrame) -> None:
        """Hold `frame` as the source's state at (store_id, seq); the caller has seen
        that sequence committed. Evicts the least recently used beyond the bound."""
        if self.max_sources == 0:
            return
        entry = WarmEntry(source, store_id, seq, frame, int(frame.estimated_size()))
        with self._lock:
            self._entries[source] = entry
            self._entries.move_to_end(source)
            while len(self._entries) > self.max_sources:
                self._entries.popitem(last=False)
                self.evictions += 1

    def drop(self, source: str) -> None:
        with self._lock:
            self._entries.pop(source, None)

    def entries(self) -> list[WarmEntry]:
        """Held entries, least recently used first."""
        with self._lock:
            return list(self._entries.values())

    @property
    def bytes_held(self) -> int:
        return sum(e.nbytes for e in self.entries())

    def summary(self) -> dict[str, Any]:
        held = self.entries()
        return {
            "max_warm_sources": self.max_sources,
            "bytes_held": sum(e.nbytes for e in held),
            "sources": [e.to_json() for e in reversed(held)],  # most recent first
            "hits": self.hits,
            "reloads": self.reloads,
            "misses": self.misses,
            "evictions": self.evictions,
        }


class StateCache:
    def __init__(self, directory: Path, store: Store, warm: WarmStates | None = None) -> None:
        self.directory = directory
        self.store = store
        self.warm = warm
        self._store_id: int | None = None

    @property
    def store_id(self) -> int:
        if self._store_id is None:
            self._store_id = self.store.store_id()
        return self._store_id

    def _recheck_store(self) -> int:
        """The store's id read again (a resident process may outlive a store recreated
        under the same URL; then nothing taken from the old one may be used)."""
        self._store_id = self.store.store_id()
        return self._store_id

    def _warm_frame(self, source: str, wm: Watermark) -> pl.DataFrame | None:
        if self.warm is None:
            return None
        return self.warm.get(source, self._recheck_store(), wm.txn_seq)

    @contextlib.contextmanager
    def resident(self, max_sources: int = 1) -> Iterator[WarmStates]:
        """Keep states warm in memory for a stretch of work (a backfill's payloads): the
        tier already there (the scheduler's), else one that lasts only as long as this."""
        if self.warm is not None:
            yield self.warm
            return
        self.warm = WarmStates(max_sources)
        try:
            yield self.warm
        finally:
            self.warm = None

    def _keep_warm(self, source: str, frame: pl.DataFrame, seq: int) -> None:
        if self.warm is not None:
            self.warm.put(source, self.store_id, seq, frame)

    def _path(self, source: str, seq: int) -> Path:
        return self.directory / f"{source}.{self.store_id}.{seq}.arrow"

    def load(self, source: str) -> tuple[pl.DataFrame, Watermark | None]:
        """(the source's diff state, the watermark it reflects)."""
        wm = self.store.watermark(source)
        if wm is None:
            return empty_state(), None
        warm = self._warm_frame(source, wm)
        if warm is not None:
            return warm, wm
        path = self._path(source, wm.txn_seq)
        if path.exists():
            try:
                frame = _read(path)
                if dict(frame.schema) == STATE_SCHEMA:
                    self._keep_warm(source, frame, wm.txn_seq)
                    return frame, wm
            except (OSError, pl.exceptions.PolarsError):
                pass
        frame, wm = self.store.read_state(source)
        self.save(source, frame, wm.txn_seq if wm else 0)
        if wm is not None:
            self._keep_warm(source, frame, wm.txn_seq)
        return frame, wm

    def stored(self, source: str, wm: Watermark | None) -> StoredState | None:
        """The cache file of the source's state at `wm` (as `load` gave it), to be read a
        key-hash partition at a time, when it was written in partitions
        (ledger/stateparts.py); None otherwise (then use `load`'s frame). The file is
        opened now: a later prune does not take it away from the reader."""
        if wm is None:
            return None
        return open_stored(self._path(source, wm.txn_seq))

    def peek(self, source: str) -> tuple[pl.DataFrame, Watermark | None] | None:
        """`load` without writing anything: None when the cache file for the store's
        watermark is missing or unreadable. For a caller that does not hold the
        source's lease (a diff computed ahead of it: `pipeline/intake/apply.diff_ahead`)."""
        wm = self.store.watermark(source)
        if wm is None:
            return empty_state(), None
        warm = self._warm_frame(source, wm)
        if warm is not None:
            return warm, wm
        try:
            frame = _read(self._path(source, wm.txn_seq))
        except (OSError, pl.exceptions.PolarsError):
            return None
        return (frame, wm) if dict(frame.schema) == STATE_SCHEMA else None

    def _prune(self, source: str, keep: Path) -> None:
        """Remove this source's older cache files and pending files left by killed
        processes (the caller holds the source's lease, so no other writer is active)."""
        own = re.compile(re.escape(source) + r"\.\d+\.\d+\.(arrow|pending\d+|tmp\d+)$")
        for old in self.directory.glob(f"{source}.*"):
            if old != keep and own.match(old.name):
                with contextlib.suppress(OSError):
                    old.unlink()

    def prepare(
        self, source: str, frame: pl.DataFrame | Iterable[pl.DataFrame], seq: int
    ) -> PendingCache:
        """Start writing the state the transaction at `seq` will commit, on another core;
        it becomes visible only by `PendingCache.publish()` after that commit. `frame`
        may come in parts (made one at a time as they are written, in any key order:
        a diff within a memory budget, pipeline/intake/bounded.py; a `StateParts` is written a
        key-hash partition to a record batch: ledger/stateparts.py)."""
        return PendingCache(self, source, frame, seq)

    def save(self, source: str, frame: pl.DataFrame, seq: int) -> None:
        """Best effort: a failure here only costs a slower next load."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(source, seq)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            frame.write_ipc(tmp, compression="uncompressed")
            os.replace(tmp, path)
            self._prune(source, keep=path)
        except OSError:
            pass


class PendingCache:
    """A cache file written to a temporary name while the payload's transaction runs."""

    def __init__(
        self,
        cache: StateCache,
        source: str,
        frame: pl.DataFrame | Iterable[pl.DataFrame],
        seq: int,
    ) -> None:
        self.cache = cache
        self.source = source
        self.seq = seq
        self.path = cache._path(source, seq)
        self.tmp = self.path.with_suffix(f".pending{os.getpid()}")
        # kept for the resident tier, which takes it once the transaction committed; a
        # state written in parts (a source under a memory budget) is never held whole
        self._frame = frame if cache.warm is not None and isinstance(frame, pl.DataFrame) else None
        self._thread = threading.Thread(target=self._write, args=(frame,), daemon=True)
        self._ok = False
        self._thread.start()

    def _write(self, frame: pl.DataFrame | Iterable[pl.DataFrame]) -> None:
        try:
            self.cache.directory.mkdir(parents=True, exist_ok=True)
            if isinstance(frame, pl.DataFrame):
                frame.write_ipc(self.tmp, compression="uncompressed")
            else:
                write_parts(self.tmp, frame)
            self._ok = True
        except (OSError, pl.exceptions.PolarsError, pa.ArrowException):
            self._ok = False

    def publish(self) -> None:
        """After commit: make the file the cache for `seq` (best effort), and keep the
        frame warm in memory (the commit at `seq` is this process's own)."""
        if self._frame is not None:
            self.cache._keep_warm(self.source, self._frame, self.seq)
            self._frame = None
        self._thread.join()
        if not self._ok:
            self.discard()
            return
        try:
            os.replace(self.tmp, self.path)
        except OSError:
            self.discard()
            return
        self.cache._prune(self.source, keep=self.path)

    def discard(self) -> None:
        """The transaction did not commit: the file must never be used."""
        self._frame = None
        self._thread.join()
        with contextlib.suppress(OSError):
            self.tmp.unlink()


def _read(path: Path) -> pl.DataFrame:
    """A state cache file's frame: memory-mapped when it is large (`MAP_BYTES`; its
    record batches, one per partition where it was written in parts, stay chunks)."""
    if path.stat().st_size < MAP_BYTES:
        return pl.read_ipc(path)
    # the mapping lives as long as the buffers that refer to it (Arrow's region), so
    # the file may be replaced or pruned while the frame is in use
    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    frame = pl.from_arrow(table, rechunk=False)
    assert isinstance(frame, pl.DataFrame)
    return frame
