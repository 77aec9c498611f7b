"""The destination-kind seam: what the sync routes (live, rebuild, reconcile, explain)
need of a destination, whatever it is -- an SQL table (sync/target.py), a GeoPackage
layer (sync/kinds/gpkg.py), and the kinds to come (a search index, a PostGIS table).

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

from collections.abc import Sequence
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
