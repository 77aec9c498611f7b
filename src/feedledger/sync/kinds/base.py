"""The destination-kind seam: what the sync routes (live, rebuild, reconcile, explain)
need of a destination, whatever it is -- an SQL table (sync/target.py), a GeoPackage
layer (sync/kinds/gpkg.py), a tantivy index (tantivy_index.py), a PostGIS table (postgis.py).

Every guarantee is orchestrated above this protocol, in sync/: the six verdicts come
from ONE judge (sync/guard.py), the checkpoint moves only after `write_batch` returned
(the kind's acknowledgement: its commit), tombstones are rows the kind keeps and
`rows` shows, reconcile compares `bucket_sums` and `rows` with the ledger. A kind only
has to: create or check its storage (`ensure`), write a batch of documents through
the guard atomically and say each one's verdict (`write_batch`), read back what it
holds (`rows`, `held`, `bucket_sums`), finish a rebuild (`finish`) and let go
(`close`).

A row read back is (key, revision, generation, generation_rank, deleted, content_hash)
-- the guard's position and the evidence reconcile reports; `held` adds written_at
(microseconds since the epoch, or None).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from feedledger.model.destination import Destination
from feedledger.sync.pg_batch import Build
from feedledger.sync.state import Outcome, Verdict
from feedledger.sync.transform import Doc

Row = tuple[Any, ...]  # (key, revision, generation, generation_rank, deleted, content_hash)


class DestinationKind(Protocol):
    """One destination's storage, opened (`sync/kinds.open_target` picks the class from
    `dest.kind`)."""

    dest: Destination
    # rebuild batches a kind takes in flight at once, each on its own connection (the
    # rebuild acknowledges them in order): 1 unless the kind writes batches of disjoint
    # keys concurrently and safely
    writers: int

    def ensure(self) -> None:
        """Create the storage if absent; refuse one that is incompatible (ConfigError),
        or unreachable (StoreUnavailableError)."""

    def ticket(self) -> int:
        """The next batch's number (fault points count batches by it)."""

    def probing(self) -> bool:
        """Whether the next rebuild batch may be sent as probes (key, position,
        generation, content hash) with its documents built only where the destination
        does not hold them already (`write_batch`'s `build`; sync/known.py)."""

    def write(self, docs: Sequence[Doc]) -> list[Verdict]:
        """`write_batch`, one verdict per document in the docs' order."""

    def write_batch(
        self, docs: Sequence[Doc], ticket: int | None = None, build: Build | None = None
    ) -> Outcome:
        """Write a batch (unique keys) through the guard, atomically: returns only once
        the destination committed it (its acknowledgement); a failure raises and
        leaves none of it. A driver's error is one StoreUnavailableError naming the
        destination."""

    def rows(self, lo: str | None = None, hi: str | None = None) -> list[Row]:
        """Every row held, tombstones included, in key order (optionally lo <= key <= hi)."""

    def held(self, keys: Sequence[str]) -> Row | None:
        """The row held for the first of `keys` present, with written_at, or None."""

    def bucket_sums(self, bounds: Sequence[tuple[str, str]]) -> list[tuple[int, int, int, int]]:
        """Per key range: (rows, sum of revisions mod 2^61 - 1, sum of generation ranks,
        tombstones) -- a checksum of what the destination holds."""

    def live(self) -> DestinationKind:
        """What the live route writes through while this one takes a rebuild's batches:
        itself (a kind rebuilt in place), or the destination as it stands (a kind that
        rebuilds into a new file: `finish` carries those writes over)."""

    def finish(self) -> None:
        """A rebuild's last batch was acknowledged: make what it wrote the destination
        (a kind that rebuilds in place has nothing to do)."""

    def close(self) -> None:
        """Release connections and files (safe to call twice)."""


class LockedBatches:
    """What a kind shares that judges and writes each batch under one lock of its own
    (the GeoPackage layer, the tantivy index: a rebuild's writer thread and the live
    route's steps take turns): batch tickets, no probing, and `write` / `write_batch`
    over the kind's `_write` (judge and write one batch, commit, return its verdicts).
    The plain verdicts (no reason, no evidence) come back grouped with their documents."""

    lock: threading.Lock

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._tickets = itertools.count(1)

    def _mapped(self, *, reading: bool = False) -> AbstractContextManager[None]:
        """The kind's errors under the block as one line naming the destination."""
        raise NotImplementedError

    def _write(self, docs: Sequence[Doc], ticket: int) -> list[Verdict]:
        """Judge and write one batch, committed when this returns; its verdicts."""
        raise NotImplementedError

    def ticket(self) -> int:
        return next(self._tickets)

    def probing(self) -> bool:
        return False

    def write(self, docs: Sequence[Doc]) -> list[Verdict]:
        by_key = {v.key: v for v in self.write_batch(docs)}
        return [by_key[d.key] for d in docs]

    def write_batch(
        self, docs: Sequence[Doc], ticket: int | None = None, build: Build | None = None
    ) -> Outcome:
        if not docs:
            return Outcome()
        if build is not None:
            docs = build(docs)
        with self.lock, self._mapped():
            judged = self._write(docs, next(self._tickets) if ticket is None else ticket)
        by_key = {d.key: d for d in docs}
        plain: dict[str, list[Doc]] = {"accepted": [], "already_current": []}
        other: list[Verdict] = []
        for v in judged:
            if v.verdict in plain and v.reason is None and v.evidence is None:
                plain[v.verdict].append(by_key[v.key])
            else:
                other.append(v)
        return Outcome([(k, g) for k, g in plain.items() if g], other)
