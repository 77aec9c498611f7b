"""A source's first export is streamed: key-ordered reads cut at key boundaries (every
version of a key in one chunk) handed to delta-rs as one RecordBatchReader and written
as ONE Delta commit. In chunks of two rows it equals `history --json` as the in-memory
export does; a chunk that does not fit the first chunk's schema (a column the first
lacks) stops the stream and the in-memory export writes it, still one commit; killed
(SIGKILL) after delta-rs took a chunk, it leaves no table, and the next export writes
it whole. SQLite and PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import feedledger
from feedledger.lake import stream
from feedledger.ledger.readers import history_rows
from helpers import Cli
from lake.delta_scenario import SRC, assert_equals_history, declare, export, ingest, table_rows

deltalake = pytest.importorskip("deltalake")

DAYS = ("2025-08-01", "2025-08-02", "2025-08-04", "2025-12-30", "2026-01-02")


def test_a_first_export_streamed_in_small_chunks_equals_history(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    for day in DAYS:
        ingest(cli, tmp_path, day)
    monkeypatch.setattr(history_rows, "BATCH_ROWS", 2)  # a key's versions span chunks
    uri = str(tmp_path / "lake")
    first = export(cli, uri)
    assert (first["committed"], first["delta_version"]) == (True, 0)
    rows = table_rows(uri)
    assert first["sources"][0]["inserted"] == len(rows)
    assert_equals_history(cli, rows)
    assert deltalake.DeltaTable(uri).version() == 0  # one commit


def test_versions_by_key_keeps_every_version_of_a_key_in_one_chunk(
    cli: Cli, tmp_path: Path
) -> None:
    declare(cli)
    for day in DAYS:
        ingest(cli, tmp_path, day)
    led = feedledger.open(cli.ws.config_path)
    try:
        store = led.context.store
        wm = store.watermark(SRC)
        assert wm is not None
        chunks = list(history_rows.versions_by_key(store, SRC, wm.recorded_at, rows=2))
        whole = pa.Table.from_batches(list(history_rows.versions_of(store, SRC, wm.recorded_at)))
    finally:
        led.close()
    assert len(chunks) > 1
    keys = [set(c.column("key").to_pylist()) for c in chunks]
    for i, mine in enumerate(keys):
        assert all(not (mine & other) for other in keys[i + 1 :])
    assert sum(c.num_rows for c in chunks) == whole.num_rows
    assert chunks[0].schema == history_rows.DECODED


def test_a_chunk_that_does_not_fit_falls_back_to_the_in_memory_export(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    for day in DAYS:
        ingest(cli, tmp_path, day)
    monkeypatch.setattr(history_rows, "BATCH_ROWS", 2)
    fitted, refused = stream.FirstExport._fitted, []

    def second_unfit(self: stream.FirstExport, chunk: pa.Table, schema: pa.Schema) -> Any:
        if self.rows:  # a chunk after the first: as one with a new column would
            raise stream.Unstreamable("column 'b' first seen after the first chunk")
        return fitted(self, chunk, schema)

    def spied(self: stream.FirstExport) -> bool:
        refused.append(real(self))
        return refused[-1]

    real = stream.FirstExport.refused
    monkeypatch.setattr(stream.FirstExport, "_fitted", second_unfit)
    monkeypatch.setattr(stream.FirstExport, "refused", spied)
    uri = str(tmp_path / "lake")
    first = export(cli, uri)
    assert refused == [True]  # the stream stopped, the in-memory export wrote it
    assert (first["committed"], first["delta_version"]) == (True, 0)
    assert_equals_history(cli, table_rows(uri))


def test_a_chunk_with_a_column_the_first_lacks_is_unstreamable() -> None:
    first = pa.table({"a": pa.array(["x"]), "n": pa.array([1], pa.int64())})
    export = stream.FirstExport(None, None, 0, [], None, lambda *_: None)
    assert [b.num_rows for b in export._fitted(first, first.schema)] == [1]
    fewer = pa.table({"n": pa.array([2], pa.int64())})  # a missing column: nulls
    [got] = list(export._fitted(fewer, first.schema))
    assert got.column("a").to_pylist() == [None]
    with pytest.raises(stream.Unstreamable, match="'b'"):
        list(export._fitted(first.append_column("b", pa.array(["y"])), first.schema))


@pytest.mark.slow
def test_a_first_export_killed_mid_stream_leaves_no_table(cli: Cli, tmp_path: Path) -> None:
    declare(cli)
    for day in DAYS:
        ingest(cli, tmp_path, day)
    uri = str(tmp_path / "lake")
    done = cli.proc(
        "export", "delta", SRC, "--to", uri, "--json",
        env={"FEEDLEDGER_FAULT": "delta_stream_chunk:kill"},
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not deltalake.DeltaTable.is_deltatable(uri)  # nothing half-visible
    assert cli.json("export", "status", "--to", uri) == []
    again = export(cli, uri)
    assert (again["committed"], again["delta_version"]) == (True, 0)
    assert_equals_history(cli, table_rows(uri))
