"""The sample a payload's codebook is chosen from (ledger/encoding/codebooks.py
`spread`): at most SAMPLE_ROWS of the payload's records spread over them; beyond
RUNS_FROM records, in SAMPLE_RUNS runs of contiguous records, so that a spilled
payload's sample reads a few of its record batches rather than every one."""

from __future__ import annotations

import polars as pl

from feedledger.formats.spill import BATCH_ROWS
from feedledger.ledger.encoding.codebooks import RUNS_FROM, SAMPLE_RUNS, spread
from feedledger.ledger.encoding.codec import SAMPLE_ROWS


def _idx(n: int) -> pl.Series:
    return pl.Series("idx", range(n), dtype=pl.UInt32)


def test_a_small_payload_is_its_own_sample() -> None:
    assert spread(_idx(SAMPLE_ROWS)).to_list() == list(range(SAMPLE_ROWS))


def test_a_payload_up_to_the_runs_threshold_is_sampled_one_record_in_so_many() -> None:
    n = 1_000_000
    sample = spread(_idx(n)).to_list()
    assert sample == list(range(0, n, n // SAMPLE_ROWS))[:SAMPLE_ROWS]
    assert spread(_idx(RUNS_FROM)).diff().drop_nulls().unique().to_list() == [
        RUNS_FROM // SAMPLE_ROWS
    ]


def test_a_larger_payload_is_sampled_in_runs_spread_over_it() -> None:
    n = 10_000_000
    sample = spread(_idx(n))
    assert sample.len() <= SAMPLE_ROWS and sample.n_unique() == sample.len()
    runs = sample.diff().fill_null(1).ne(1).sum() + 1
    assert runs == SAMPLE_RUNS
    # from the first records to the last run's start, one run every n // SAMPLE_RUNS
    assert sample[0] == 0 and sample.max() >= n - n // SAMPLE_RUNS
    # a first load's (key-ordered, contiguous) records: a batch or two of the spilled
    # payload per run, not each of its ~150
    batches = (sample // BATCH_ROWS).n_unique()
    assert batches <= 2 * SAMPLE_RUNS < n // BATCH_ROWS // 4
