"""A tantivy full-text index as a destination (`destination add --tantivy DIR`).

Each batch is decided and written under tantivy's single-writer lock: the batch takes
the index's one IndexWriter (the lock file in the folder: a second writer, in this
process or another, waits for it, then fails with one clear line after LOCK_WAIT_S),
reloads the reader to the last commit, reads the documents held for the batch's keys
(a term-set lookup on `fl_key`, `raw` tokenizer), judges each incoming document with
the ONE guard (sync/guard.py's `judge`), and for the accepted ones deletes the held
document by its key term and adds the new one (a deletion: a tombstone document with
the guard's fields, never expiring). Then `commit` -- the acknowledgement; the writer
is released (`wait_merging_threads`: merges finished, lock freed). Any exception
before the commit is a `rollback`: the writer's context manager is never used, since
it commits on exit even after an exception. A crash before the commit leaves nothing
of the batch (tantivy publishes only committed segments).

Reads (`rows`, `held`, `bucket_sums`, sync/kinds/tantivy_search.py) use a searcher of
the last commit: they never take the lock nor wait for a writer.

A rebuild writes in place (as a table): `live` is itself, `finish` has nothing to do.
Schema and documents: sync/kinds/tantivy_schema.py.
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from feedledger import faults
from feedledger.model.destination import Destination
from feedledger.model.errors import FeedledgerError, StoreUnavailableError
from feedledger.model.timeutil import now_us
from feedledger.sync.guard import evidence as guard_evidence
from feedledger.sync.guard import judge
from feedledger.sync.kinds.base import LockedBatches, Row
from feedledger.sync.kinds.tantivy_schema import document, one_line, open_index
from feedledger.sync.state import Verdict
from feedledger.sync.transform import Doc

MOD = 2305843009213693951  # 2^61 - 1, as reconcile's checksum
LOCK_WAIT_S = 120.0  # how long a second writer waits for the index's lock
HEAP = 96_000_000  # the writer's indexing memory (split between its threads)
THREADS = 1  # the writer's indexing threads (the machine's cores are the sync's)
FIELDS = ("fl_revision", "fl_generation", "fl_generation_rank", "fl_deleted", "fl_content_hash")


class Held(NamedTuple):
    """A document held for a key, as `judge` and reconcile read it."""

    key: str
    revision: int
    generation: str
    generation_rank: int
    deleted: bool
    content_hash: str
    written_at: int | None
    doc: Any = None  # its JSON text (None: a tombstone)

    def row(self) -> Row:
        return (self.key, self.revision, self.generation, self.generation_rank,
                self.deleted, self.content_hash)  # fmt: skip


def is_busy(exc: BaseException) -> bool:
    return "LockBusy" in str(exc) or "Failed to acquire" in str(exc)


class TantivyIndex(LockedBatches):
    writers = 1  # one IndexWriter per index: tantivy's lock

    def __init__(self, dest: Destination, **_: Any) -> None:
        super().__init__()
        self.dest = dest
        self.path = Path(dest.url)
        self.text_fields = dest.text_fields
        self.index: Any = None
        self._keyed: tuple[int | None, Any, list[tuple[str, Any]]] | None = None

    # -- the index --------------------------------------------------------------------------
    def ensure(self) -> None:
        with self.lock:
            self.index = open_index(self.path, self.text_fields)

    def _index(self) -> Any:
        if self.index is None:
            self.index = open_index(self.path, self.text_fields)
        return self.index

    @contextmanager
    def _mapped(self, *, reading: bool = False) -> Iterator[None]:
        """tantivy's errors under the block as one line naming the destination."""
        try:
            yield
        except (FeedledgerError, faults.InjectedFailure):
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            what = "read" if reading else "write"
            raise StoreUnavailableError(
                f"destination {self.dest.name}: cannot {what} tantivy index {self.path}: "
                f"{one_line(exc)}"
            ) from None

    def close(self) -> None:
        with self.lock:
            self.index = None

    def live(self) -> TantivyIndex:
        return self

    def finish(self) -> None:
        """A rebuild writes the index in place: nothing to swap."""

    # -- the guarded write ------------------------------------------------------------------
    def writer(self) -> Any:
        """The index's one IndexWriter: waits while another writer holds the lock."""
        index = self._index()
        deadline = time.monotonic() + LOCK_WAIT_S
        pause = 0.01
        while True:
            try:
                return index.writer(heap_size=HEAP, num_threads=THREADS)
            except ValueError as exc:
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreUnavailableError(
                        f"destination {self.dest.name}: tantivy index {self.path} is locked "
                        f"by another writer (waited {LOCK_WAIT_S:.0f} s)",
                        hint="another sync of this destination is running; let it finish",
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.25)

    def _write(self, docs: Sequence[Doc], ticket: int) -> list[Verdict]:
        writer = self.writer()
        try:
            self.index.reload()  # the last commit, whoever made it: under the lock
            judged = self.apply(writer, docs)
            faults.point("destination_staged", ticket)  # written, not committed
            writer.commit()  # the acknowledgement
        except BaseException:
            writer.rollback()
            raise
        finally:
            writer.wait_merging_threads()  # merges done, the lock released
        self.index.reload()
        return judged

    def apply(self, writer: Any, docs: Sequence[Doc]) -> list[Verdict]:
        """The batch judged against what the index holds and written (uncommitted)."""
        held = self._held(self.index.searcher(), [d.key for d in docs])
        verdicts: list[Verdict] = []
        now = now_us()
        for d in docs:
            row = held.get(d.key)
            verdict, reason = judge(d, row)
            found = None
            if verdict == "accepted":
                if row is not None:
                    writer.delete_documents_by_term("fl_key", d.key)
                writer.add_json(document(d, self.text_fields, now))
            elif verdict == "unresolved" and row is not None:
                found = guard_evidence(d, row)
            verdicts.append(Verdict(d.key, verdict, d.revision, d.generation,
                                    d.content_hash, reason, found))  # fmt: skip
        return verdicts

    # -- reading back -----------------------------------------------------------------------
    def _held(self, searcher: Any, keys: Sequence[str]) -> dict[str, Held]:
        import tantivy  # lazy: the `search` extra

        if not keys or searcher.num_docs == 0:
            return {}
        query = tantivy.Query.term_set_query(self.index.schema, "fl_key", list(keys))
        hits = searcher.search(query, limit=len(keys), count=False).hits
        out: dict[str, Held] = {}
        for _score, addr in hits:
            h = _read(searcher.doc(addr).to_dict())
            out[h.key] = h
        return out

    def _searcher(self) -> Any:
        index = self._index()
        index.reload()
        return index.searcher()

    def _ordered(self) -> tuple[Any, list[tuple[str, Any]]]:
        """A searcher of the last commit and (key, address) of every document it holds,
        in key order (the key's fast field). Sorting a million keys costs seconds: kept
        while the index's commit (meta.json's opstamp) stays the same -- reconcile reads
        the whole index's sums, then the rows outside and in differing buckets."""
        import tantivy  # lazy: the `search` extra

        stamp = _opstamp(self.path)
        if self._keyed is not None and stamp is not None and self._keyed[0] == stamp:
            return self._keyed[1], self._keyed[2]
        searcher = self._searcher()
        n = searcher.num_docs
        keyed: list[tuple[str, Any]] = []
        if n:
            hits = searcher.search(
                tantivy.Query.all_query(), limit=n, count=False,
                order_by_field="fl_key", order=tantivy.Order.Asc,
            ).hits  # fmt: skip
            keyed = [(str(k), a) for k, a in hits]
        # (read before the reload: a commit in between only makes the next call sort again)
        self._keyed = (stamp, searcher, keyed)
        return searcher, keyed

    def rows(self, lo: str | None = None, hi: str | None = None) -> list[Row]:
        with self.lock, self._mapped(reading=True):
            searcher, keyed = self._ordered()
            if lo is not None and hi is not None:
                keys = [k for k, _a in keyed]
                keyed = keyed[bisect.bisect_left(keys, lo) : bisect.bisect_right(keys, hi)]
            return [_read(searcher.doc(a).to_dict()).row() for _k, a in keyed]

    def held(self, keys: Sequence[str]) -> Row | None:
        with self.lock, self._mapped(reading=True):
            searcher = self._searcher()
            for key in keys:
                found = self._held(searcher, [key]).get(key)
                if found is not None:
                    return (*found.row(), found.written_at)
        return None

    def bucket_sums(self, bounds: Sequence[tuple[str, str]]) -> list[tuple[int, int, int, int]]:
        with self.lock, self._mapped(reading=True):
            searcher, keyed = self._ordered()
            addrs = [a for _k, a in keyed]
            revs = searcher.fast_field_values("fl_revision", addrs) if addrs else []
            ranks = searcher.fast_field_values("fl_generation_rank", addrs) if addrs else []
            gone = searcher.fast_field_values("fl_deleted", addrs) if addrs else []
        keys = [k for k, _a in keyed]
        out = []
        for lo, hi in bounds:
            i, j = bisect.bisect_left(keys, lo), bisect.bisect_right(keys, hi)
            revisions = sum(int(r) % MOD for r in revs[i:j])
            out.append((j - i, revisions, sum(map(int, ranks[i:j])), sum(map(int, gone[i:j]))))
        return out


def _opstamp(path: Path) -> int | None:
    """The index's last commit (meta.json's opstamp; None: unreadable, never cached)."""
    try:
        return int(json.loads((path / "meta.json").read_text(encoding="utf-8"))["opstamp"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read(fields: dict[str, list[Any]]) -> Held:
    """A stored document's guard fields (tantivy stores each as a list of values)."""

    def one(name: str) -> Any:
        values = fields.get(name) or [None]
        return values[0]

    def text(name: str) -> Any:
        value = one(name)
        return None if value is None else bytes(value).decode("utf-8")

    return Held(str(one("fl_key")), int(one("fl_revision")), text("fl_generation"),
                int(one("fl_generation_rank")), bool(one("fl_deleted")),
                text("fl_content_hash"), one("fl_written_at"), text("fl_doc"))  # fmt: skip
