"""Local cache of a source's diff state (key, version id, content hash, revision,
deleted), so a daily ingest loads it in one memory-mapped columnar read.

The cache is derived and disposable. Its file name carries the store id and the
watermark's commit sequence it was taken at; it is used only when both match the
store, so a crash between commit and cache write, another worker's run, a
retraction or a different store all simply fall back to recomputing the state from
`versions` (the latest non-retracted version per key) in one columnar read.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from feedledger.diff import STATE_SCHEMA, empty_state

if TYPE_CHECKING:
    from feedledger.ledger.records import Watermark
    from feedledger.ledger.store import Store


class StateCache:
    def __init__(self, directory: Path, store: Store) -> None:
        self.directory = directory
        self.store = store
        self._store_id: int | None = None

    @property
    def store_id(self) -> int:
        if self._store_id is None:
            self._store_id = self.store.store_id()
        return self._store_id

    def _path(self, source: str, seq: int) -> Path:
        return self.directory / f"{source}.{self.store_id}.{seq}.arrow"

    def load(self, source: str) -> tuple[pl.DataFrame, Watermark | None]:
        """(the source's diff state, the watermark it reflects)."""
        wm = self.store.watermark(source)
        if wm is None:
            return empty_state(), None
        path = self._path(source, wm.txn_seq)
        if path.exists():
            try:
                frame = pl.read_ipc(path)
                if dict(frame.schema) == STATE_SCHEMA:
                    return frame, wm
            except (OSError, pl.exceptions.PolarsError):
                pass
        frame, wm = self.store.read_state(source)
        self.save(source, frame, wm.txn_seq if wm else 0)
        return frame, wm

    def peek(self, source: str) -> tuple[pl.DataFrame, Watermark | None] | None:
        """`load` without writing anything: None when the cache file for the store's
        watermark is missing or unreadable. For a caller that does not hold the
        source's lease (a diff computed ahead of it: `pipeline/apply.diff_ahead`)."""
        wm = self.store.watermark(source)
        if wm is None:
            return empty_state(), None
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

    def prepare(
        self, source: str, frame: pl.DataFrame | Iterable[pl.DataFrame], seq: int
    ) -> PendingCache:
        """Start writing the state the transaction at `seq` will commit, on another core;
        it becomes visible only by `PendingCache.publish()` after that commit. `frame`
        may come in parts (made one at a time as they are written, in any key order:
        a diff within a memory budget, pipeline/bounded.py)."""
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
        self._thread = threading.Thread(target=self._write, args=(frame,), daemon=True)
        self._ok = False
        self._thread.start()

    def _write(self, frame: pl.DataFrame | Iterable[pl.DataFrame]) -> None:
        try:
            self.cache.directory.mkdir(parents=True, exist_ok=True)
            if isinstance(frame, pl.DataFrame):
                frame.write_ipc(self.tmp, compression="uncompressed")
            else:
                _write_parts(self.tmp, frame)
            self._ok = True
        except (OSError, pl.exceptions.PolarsError, pa.ArrowException):
            self._ok = False

    def publish(self) -> None:
        """After commit: make the file the cache for `seq` (best effort)."""
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
        self._thread.join()
        with contextlib.suppress(OSError):
            self.tmp.unlink()


def _write_parts(path: Path, parts: Iterable[pl.DataFrame]) -> None:
    """The parts, one after the other, as one Arrow IPC file of the state's schema."""
    empty = empty_state().to_arrow(compat_level=pl.CompatLevel.newest())
    with pa.ipc.new_file(str(path), empty.schema) as writer:
        for part in parts:
            table = part.select(list(STATE_SCHEMA)).cast(STATE_SCHEMA)
            writer.write_table(table.to_arrow(compat_level=pl.CompatLevel.newest()))
