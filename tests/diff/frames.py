"""The diff's inputs built from a hypothesis dictionary of rows, shared by the diff property
tests (whole, columnar, partitioned, read from stored partitions): key -> (content hash,
revision, deleted / delete marker)."""

from __future__ import annotations

import polars as pl

from feedledger.diff import STATE_SCHEMA

Rows = dict[str, tuple[int, str | None, bool]]


def state_frame(found: Rows) -> pl.DataFrame:
    """A source's current state: one version per key (version ids from 100)."""
    return pl.DataFrame(
        {
            "key": list(found),
            "version_id": [100 + i for i in range(len(found))],
            "hash": [h for h, _r, _d in found.values()],
            "revision": [r for _h, r, _d in found.values()],
            "deleted": [d for _h, _r, d in found.values()],
        },
        schema=STATE_SCHEMA,
    )


def observation_frame(found: Rows, markers: bool) -> pl.DataFrame:
    """A payload's observations (delete markers only where `markers`: a changes payload)."""
    return pl.DataFrame(
        {
            "idx": list(range(len(found))),
            "key": list(found),
            "hash": [h for h, _r, _d in found.values()],
            "revision": [r for _h, r, _d in found.values()],
            "deleted": [d and markers for _h, _r, d in found.values()],
        },
        schema={
            "idx": pl.UInt32,
            "key": pl.String,
            "hash": pl.Int64,
            "revision": pl.String,
            "deleted": pl.Boolean,
        },
    )
