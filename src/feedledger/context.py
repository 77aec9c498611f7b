"""Opening a workspace's store, archive and state cache together.

The store (SQLAlchemy and the database driver) is imported when it is first needed,
so a command can parse a payload while another thread opens the store; the archive's
modules too, so a command that only reads the store (a snapshot, a query) never loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from feedledger.config import Workspace
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.archive import Archive
    from feedledger.ledger.statecache import StateCache
    from feedledger.ledger.store import Store


@dataclass
class Context:
    workspace: Workspace
    # True when the process ends right after this context closes (the CLI): an SQLite
    # store then leaves its write-ahead log to the next writer (Store.close).
    leave_wal: bool = False
    # Keep up to this many sources' diff states in memory between payloads (a resident
    # process: the scheduler); None keeps none beyond one backfill (ledger/statecache.py)
    warm_sources: int | None = None
    # A resident process's queue for work an ingest finishes after its payload is
    # applied (the raw object's compression, archive/settle.py): handed the call, it
    # runs it on a thread of its own, in order, while the process goes on. None: the
    # ingest waits for that work before it returns (a command that exits next).
    after_apply: Callable[[Callable[[], object]], None] | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _archive: Archive | None = field(default=None, repr=False)
    _cache: StateCache | None = field(default=None, repr=False)

    @property
    def archive(self) -> Archive:
        """The workspace's archive: a local folder or S3-compatible object storage
        (s3fs is imported only then)."""
        if self._archive is None:
            from feedledger.archive import open_archive  # lazy: not for store-only commands

            self._archive = open_archive(
                self.workspace.archive_location,
                endpoint_url=self.workspace.archive_endpoint_url,
                keyframe_every=self.workspace.archive_keyframe_every,
            )
        return self._archive

    @property
    def store(self) -> Store:
        if self._store is None:
            from feedledger.ledger.store import Store  # lazy: SQLAlchemy, while a parse runs

            self._store = Store(self.workspace.store_url)
        return self._store

    @property
    def cache(self) -> StateCache:
        if self._cache is None:
            from feedledger.ledger.statecache import StateCache, WarmStates  # lazy: polars

            warm = WarmStates(self.warm_sources) if self.warm_sources is not None else None
            self._cache = StateCache(self.workspace.state_dir / "state", self.store, warm)
        return self._cache

    def close(self) -> None:
        if self._store is not None:
            with stage("store_close"):
                self._store.close(leave_wal=self.leave_wal)
            self._store = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
