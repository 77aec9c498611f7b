"""Prove the diff state consistent with the ledger: the local cache the diff loads, and
the store's columnar state read, must both equal the latest non-retracted version per
key recomputed from history by a separate query."""

from __future__ import annotations

from typing import Any

import polars as pl

from feedledger.context import Context
from feedledger.ledger.queries import recompute_state


def _compare(name: str, expected: pl.DataFrame, found: pl.DataFrame) -> dict[str, Any]:
    cols = ["key", "version_id", "hash", "revision", "deleted"]
    a = expected.select(cols).sort("key")
    b = found.select(cols).sort("key")
    missing = a.join(b, on="key", how="anti")["key"].to_list()
    extra = b.join(a, on="key", how="anti")["key"].to_list()
    both = a.join(b, on="key", suffix="_found")
    differ = both.filter(
        pl.any_horizontal([~pl.col(c).eq_missing(pl.col(f"{c}_found")) for c in cols[1:]])
    )["key"].to_list()
    return {
        "name": name,
        "rows": b.height,
        "missing": missing[:20],
        "extra": extra[:20],
        "different": differ[:20],
        "ok": not (missing or extra or differ),
    }


def verify(ctx: Context, source: str) -> dict[str, Any]:
    src = ctx.workspace.source(source)
    store = ctx.store
    truth = recompute_state(store, src.name)
    table, wm = store.read_state(src.name)
    seq = wm.txn_seq if wm else 0
    cache, _ = ctx.cache.load(src.name)
    checks = [_compare("store_state", truth, table), _compare("cache", truth, cache)]
    return {
        "source": src.name,
        "entities": truth.height,
        "live": int(truth.height - truth["deleted"].sum()) if truth.height else 0,
        "commit_seq": seq,
        "ok": all(c["ok"] for c in checks),
        "checks": checks,
    }
