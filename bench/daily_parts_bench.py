"""CPU seconds of a daily ingest's parts, old way and new way alternating in one process.

    PYTHONPATH=$PWD/src python bench/daily_parts_bench.py [--data /work/data/n1m] [--rounds 7]

Day 1 and day 2 of a gen_parcels.py folder are diffed and applied in memory (no store):
day 2's observations against day 1's state, as a daily ingest diffs them. Then, ROUNDS
times and alternating (so a shared machine's drift falls on both alike), each part is
timed by the process's CPU clock (user + sys of every thread: polars works on all cores):

* `next_state`: the state after the day's versions, by joining every state key against
  the versions' keys (the old way) and by patching the versions' rows in place
  (`DiffResult.state_rows`);
* `diff`: day 2's diff against day 1's state (both in key order, as gen_parcels.py
  writes them), by the hash join on the key hash with its collision check (the old
  way, forced) and by pairing the key-ordered rows by position (`diff/aligned.py`);
* `codebook`: the planning `codebooks.choose` does before a payload's transaction, over
  the sample of the day's changed texts: the whole sample's gains (the old way) and the
  probe (`PROBE_EVERY`), which decides when the source's newest codebook still covers it.

Prints one JSON object: medians and every round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any
from unittest import mock

import polars as pl

from feedledger.config import make_source
from feedledger.diff import aligned, compute, empty_state, next_state
from feedledger.formats import read_observations
from feedledger.ledger.encoding import codebooks
from feedledger.ledger.encoding.codec import all_gains, covers, plan_from


def _cpu(call: Any) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=Path("/work/data/n1m"))
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    src = make_source("parcels", key=["parcel_id"], format="csv", kind="snapshot")
    days = sorted(args.data.glob("parcels_*.csv"))[:2]
    obs = [read_observations(d.read_bytes(), src, label=d.name) for d in days]
    first = compute(obs[0].frame, empty_state(), kind=src.kind, use_revision=False)
    state = next_state(empty_state(), _ids(first.versions, 1))
    diff = compute(obs[1].frame, state, kind=src.kind, use_revision=False)
    versions = _ids(diff.versions, state.height + 1)
    idx = versions.get_column("idx").drop_nulls()
    sample = codebooks.sample_of(obs[1].attributes(codebooks.spread(idx)))
    book = plan_from(*all_gains(sample))
    probe = sample[:: codebooks.PROBE_EVERY]
    assert covers(book, *all_gains(probe)) and covers(book, *all_gains(sample))
    joined = next_state(state, versions).sort("key")
    assert next_state(state, versions, diff.state_rows).sort("key").equals(joined)

    def hash_join() -> None:
        with mock.patch.object(aligned, "sorted_rows", lambda *_a: None):
            compute(obs[1].frame, state, kind=src.kind, use_revision=False)

    parts = {
        "diff_hash_join": hash_join,
        "diff_key_order": lambda: compute(obs[1].frame, state, kind=src.kind, use_revision=False),
        "next_state_joined": lambda: next_state(state, versions),
        "next_state_patched": lambda: next_state(state, versions, diff.state_rows),
        "codebook_whole_sample": lambda: covers(book, *all_gains(sample)),
        "codebook_probe": lambda: covers(book, *all_gains(probe)),
    }
    rounds: dict[str, list[float]] = {name: [] for name in parts}
    for r in range(args.rounds):
        for name in parts if r % 2 == 0 else reversed(list(parts)):
            rounds[name].append(round(_cpu(parts[name]), 4))
    print(
        json.dumps(
            {
                "data": str(args.data),
                "state_rows": state.height,
                "versions": versions.height,
                "sample": len(sample),
                "probe": len(probe),
                "median_cpu_s": {n: round(statistics.median(v), 4) for n, v in rounds.items()},
                "rounds": rounds,
            },
            indent=1,
        )
    )


def _ids(versions: pl.DataFrame, first: int) -> pl.DataFrame:
    return versions.with_columns(
        (pl.int_range(versions.height, dtype=pl.Int64) + first).alias("version_id")
    )


if __name__ == "__main__":
    main()
