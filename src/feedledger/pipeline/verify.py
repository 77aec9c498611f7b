"""Prove the diff state consistent with the ledger: the local cache the diff loads, and
the store's columnar state read, must both equal the latest non-retracted version per
key recomputed from history by a separate query. `verify_sample`: the cache alone, for a
random sample of its keys and its count of keys (`doctor` on a large source)."""

from __future__ import annotations

from typing import Any

import polars as pl

from feedledger.context import Context
from feedledger.ledger.queries import count_keys, recompute_state


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


def verify_sample(ctx: Context, source: str, keys: int, seed: int | None = None) -> dict[str, Any]:
    """`verify`'s report for the cache alone, checked on `keys` keys drawn at random from
    it (each key's latest version recomputed from history) and on its height against
    history's count of keys (a key the cache lacks or has too many of shows there)."""
    src = ctx.workspace.source(source)
    cache, wm = ctx.cache.load(src.name)
    drawn = cache.select("key").sample(min(keys, cache.height), seed=seed)["key"].to_list()
    truth = recompute_state(ctx.store, src.name, drawn)
    check = _compare("cache", truth, cache.filter(pl.col("key").is_in(drawn)))
    counted = count_keys(ctx.store, src.name)
    if counted != cache.height:
        check["ok"] = False
        check["note"] = f"{cache.height:,} keys in the cache, {counted:,} in history"
    return {
        "source": src.name,
        "entities": counted,
        "sampled": len(drawn),
        "commit_seq": wm.txn_seq if wm else 0,
        "ok": check["ok"],
        "checks": [check],
    }
