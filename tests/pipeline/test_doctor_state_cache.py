"""`doctor`'s state-cache check: above its size threshold the cache is checked against
history on a random sample of its keys and on its key count (`verify_sample`), and
`full` checks it whole (thresholds forced low so that a small source is "large"); a
difference seen while runs keep committing is looked at again, never judged on reads
of two moments."""

from __future__ import annotations

import itertools
from pathlib import Path

import polars as pl
import pytest

from feedledger.context import Context
from feedledger.model.timeutil import now_us
from feedledger.pipeline.doctor import data_checks
from feedledger.pipeline.doctor.data_checks import check_state_cache
from feedledger.pipeline.doctor.findings import Options
from feedledger.pipeline.verify import verify_sample
from helpers import Cli, MakeSource

ROWS = 40


def _ingested(cli: Cli, make_source: MakeSource, tmp_path: Path) -> Path:
    make_source("larimer")
    path = tmp_path / "larimer_2026-08-01.csv"
    path.write_text(
        "parcel_id,zoning\n" + "".join(f"{i},Z{i}\n" for i in range(ROWS)), encoding="utf-8"
    )
    cli("ingest", "larimer", str(path))
    (cache,) = (cli.ws.state_dir / "state").glob("larimer.*.arrow")
    return cache


def _large(key_sample: int = 5, full: bool = False) -> Options:
    return Options(now_us=now_us(), full=full, full_verify_below=1, key_sample=key_sample)


def test_a_sampled_check_finds_a_changed_entity_among_its_keys(
    cli: Cli, make_source: MakeSource, tmp_path: Path
) -> None:
    cache = _ingested(cli, make_source, tmp_path)
    with Context(cli.ws) as ctx:
        assert check_state_cache(ctx, "larimer", _large(key_sample=10)) == (
            [],
            f"sampled (10 of {ROWS} keys)",
        )
        assert verify_sample(ctx, "larimer", 10, seed=1)["sampled"] == 10
    frame = pl.read_ipc(cache)
    frame.with_columns(pl.col("hash") + 1).write_ipc(cache)  # every entity wrong
    with Context(cli.ws) as ctx:
        found, how = check_state_cache(ctx, "larimer", _large(key_sample=5))
    assert how == f"sampled (5 of {ROWS} keys)"
    assert [f.code for f in found] == ["state_cache_mismatch"]
    assert "5 different" in found[0].what


def test_a_key_missing_from_the_cache_shows_in_its_count(
    cli: Cli, make_source: MakeSource, tmp_path: Path
) -> None:
    cache = _ingested(cli, make_source, tmp_path)
    pl.read_ipc(cache).slice(1).write_ipc(cache)  # one key dropped
    with Context(cli.ws) as ctx:
        report = verify_sample(ctx, "larimer", 3)
        found, _ = check_state_cache(ctx, "larimer", _large(key_sample=3))
        whole, how = check_state_cache(ctx, "larimer", _large(full=True))
    assert not report["ok"] and report["entities"] == ROWS
    assert report["checks"][0]["note"] == f"{ROWS - 1} keys in the cache, {ROWS} in history"
    assert f"{ROWS - 1} keys in the cache" in found[0].what
    assert how == "whole" and "1 missing" in whole[0].what


def test_a_difference_seen_while_the_source_advances_is_not_judged(
    cli: Cli, make_source: MakeSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _ingested(cli, make_source, tmp_path)
    pl.read_ipc(cache).slice(1).write_ipc(cache)
    commits = itertools.count()  # a run commits between every two reads of the watermark
    monkeypatch.setattr(data_checks, "_seq", lambda ctx, source: next(commits))
    with Context(cli.ws) as ctx:
        found, how = check_state_cache(ctx, "larimer", _large())
    assert found == [] and how.endswith("not judged: larimer advanced during each of 3 looks")
    monkeypatch.setattr(data_checks, "_seq", lambda ctx, source: 7)  # settled: judged
    with Context(cli.ws) as ctx:
        assert [f.code for f in check_state_cache(ctx, "larimer", _large())[0]] == [
            "state_cache_mismatch"
        ]
