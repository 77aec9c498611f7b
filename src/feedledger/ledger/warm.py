"""The resident tier of the diff-state cache: each source's state frame kept in memory
between payloads by a long-lived process (the scheduler, a long backfill or replay).

An entry is the state after the commit it was taken at, keyed by (store id, the
source's commit sequence). `StateCache` hands it out only when the store's watermark
still has that very sequence (and the store that id): a payload applied by another
process, a retraction or a replay moves the sequence on, and the entry is dropped and
reloaded, never patched. At most `max_sources` sources are held, the least recently
used dropped first; what is held is counted in bytes (`summary`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import polars as pl

DEFAULT_MAX_SOURCES = 8


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
