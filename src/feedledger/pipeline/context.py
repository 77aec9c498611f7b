"""Opening a workspace's store, archive and state cache together."""

from __future__ import annotations

from dataclasses import dataclass, field

from feedledger.archive import LocalArchive, open_archive
from feedledger.config import Workspace
from feedledger.ledger.statecache import StateCache
from feedledger.ledger.store import Store
from feedledger.timing import stage


@dataclass
class Context:
    workspace: Workspace
    _store: Store | None = field(default=None, repr=False)
    _archive: LocalArchive | None = field(default=None, repr=False)
    _cache: StateCache | None = field(default=None, repr=False)

    @property
    def archive(self) -> LocalArchive:
        if self._archive is None:
            self._archive = open_archive(self.workspace.archive_root)
        return self._archive

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.workspace.store_url)
        return self._store

    @property
    def cache(self) -> StateCache:
        if self._cache is None:
            self._cache = StateCache(self.workspace.state_dir / "state", self.store)
        return self._cache

    def close(self) -> None:
        if self._store is not None:
            with stage("store_close"):
                self._store.close()
            self._store = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
