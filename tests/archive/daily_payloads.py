"""Daily CSV payloads for the archive's compression tests, and what an ingest does with
one before it settles (the object stored raw, then the publication)."""

from __future__ import annotations

import hashlib
import random

from feedledger.archive import LocalArchive

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000


def daily(days: int, rows: int, *, seed: int, changes: int, span: int) -> list[bytes]:
    """CSV snapshots a day apart, `changes` rows given a new value (below `span`) each day."""
    rnd = random.Random(seed)
    table = {i: rnd.randrange(span) for i in range(rows)}
    out: list[bytes] = []
    for _ in range(days):
        for key in rnd.sample(sorted(table), changes):
            table[key] = rnd.randrange(span)
        out.append(("id,value\n" + "".join(f"{k},{v}\n" for k, v in table.items())).encode())
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archived_raw(archive: LocalArchive, data: bytes, day: int) -> str:
    """What an ingest does before it settles: the object raw, then the publication."""
    digest = archive.put_object(data, "larimer", later=True)
    archive.put("larimer", data, published_at=DAY0 + day * DAY, fetched_at=FETCHED, sha256=digest)
    return digest
