"""Local cache of a source's diff state (key, version id, content hash, revision,
deleted), so a daily ingest loads it in one memory-mapped columnar read.

The cache is derived and disposable. Its file name carries the store id and the
watermark's commit sequence it was taken at; it is used only when both match the
store, so a crash between commit and cache write, another worker's run, a
retraction or a different store all simply fall back to recomputing the state from
`versions` (the latest non-retracted version per key) in one columnar read.

A long-lived process (the scheduler, a long backfill or replay) also keeps the frames
in memory (`warm`: ledger/warm.py), under the same key and the same rule: used only
when the store's id and the source's watermark sequence, read again before each use,
are the ones the frame was committed at.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from feedledger.diff import STATE_SCHEMA, empty_state
from feedledger.ledger.warm import WarmStates

if TYPE_CHECKING:
    from feedledger.ledger.records import Watermark
    from feedledger.ledger.store import Store


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
                frame = pl.read_ipc(path)
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

    def peek(self, source: str) -> tuple[pl.DataFrame, Watermark | None] | None:
        """`load` without writing anything: None when the cache file for the store's
        watermark is missing or unreadable. For a caller that does not hold the
        source's lease (a diff computed ahead of it: `pipeline/apply.diff_ahead`)."""
        wm = self.store.watermark(source)
        if wm is None:
            return empty_state(), None
        warm = self._warm_frame(source, wm)
        if warm is not None:
            return warm, wm
        try:
            frame = pl.read_ipc(self._path(source, wm.txn_seq))
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

    def prepare(self, source: str, frame: pl.DataFrame, seq: int) -> PendingCache:
        """Start writing the state the transaction at `seq` will commit, on another core;
        it becomes visible only by `PendingCache.publish()` after that commit."""
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

    def __init__(self, cache: StateCache, source: str, frame: pl.DataFrame, seq: int) -> None:
        self.cache = cache
        self.source = source
        self.seq = seq
        self.path = cache._path(source, seq)
        self.tmp = self.path.with_suffix(f".pending{os.getpid()}")
        # kept for the resident tier, which takes it once the transaction committed
        self._frame = frame if cache.warm is not None else None
        self._thread = threading.Thread(target=self._write, args=(frame,), daemon=True)
        self._ok = False
        self._thread.start()

    def _write(self, frame: pl.DataFrame) -> None:
        try:
            self.cache.directory.mkdir(parents=True, exist_ok=True)
            frame.write_ipc(self.tmp, compression="uncompressed")
            self._ok = True
        except (OSError, pl.exceptions.PolarsError):
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
