"""An incremental export's updates to a local table are committed by feedledger itself
(`lake/rewrite.py`): only the files holding a changed row are rewritten (copy-on-write,
as delta-rs's MERGE would, without its join), and rewritten rows are filed apart by
whether they are open, so a later export leaves the closed history's files alone. The
table equals `history --json` after each commit, and time travel still follows the
commits. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from feedledger.lake import rewrite
from helpers import Cli
from lake.delta_scenario import assert_equals_history, declare, export, ingest, table_rows

deltalake = pytest.importorskip("deltalake")


def files(uri: str) -> set[str]:
    return set(deltalake.DeltaTable(uri).get_add_actions(flatten=True).column("path").to_pylist())


def closed_only(uri: str, path: str) -> bool:
    data = pq.read_table(str(Path(uri) / unquote(path)))
    open_rows = pc.and_(
        pc.is_null(data.column("valid_to")), pc.is_null(data.column("retracted_at"))
    )
    return not pc.any(open_rows).as_py()


def test_updates_rewrite_only_the_files_holding_them(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = rewrite.rewrite

    def counted(*args: object) -> None:
        calls.append(1)
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rewrite, "rewrite", counted)
    uri = str(tmp_path / "lake")
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    ingest(cli, tmp_path, "2025-08-02")
    export(cli, uri)
    ingest(cli, tmp_path, "2025-08-04")  # closes exported rows: an update commit
    second = export(cli, uri)
    assert second["sources"][0]["updated"] >= 1 and calls == [1]
    assert_equals_history(cli, table_rows(uri))
    before = files(uri)
    closed = {p for p in before if closed_only(uri, p)}
    assert closed  # the rows 08-04 closed, filed apart from the open ones

    ingest(cli, tmp_path, "2025-08-05")  # closes open rows only: no closed row changes
    third = export(cli, uri)
    assert third["sources"][0]["updated"] >= 1 and calls == [1, 1]
    after = files(uri)
    assert closed <= after  # the closed history's files left alone
    assert before - after  # and the files holding the rows it closed replaced
    assert_equals_history(cli, table_rows(uri))
    versions = [deltalake.DeltaTable(uri, version=v).to_pyarrow_table().num_rows for v in (0, 1, 2)]
    assert versions == sorted(versions) and versions[0] < versions[2]  # time travel kept


def test_a_table_compacted_and_vacuumed_by_delta_rs_is_exported_on(
    cli: Cli, tmp_path: Path
) -> None:
    """The housekeeping README.md names -- delta-rs's own `optimize.compact()` (small
    files merged, open and closed rows together) and `vacuum` (the files no version
    within the retention needs removed) -- leaves a table the next export carries on
    from, equal to `history` (its position is in the table's transactions, which
    neither touches)."""
    uri = str(tmp_path / "lake")
    declare(cli)
    for day in ("2025-08-01", "2025-08-02", "2025-08-04"):
        ingest(cli, tmp_path, day)
        export(cli, uri)
    table = deltalake.DeltaTable(uri)
    table.optimize.compact()
    removed = deltalake.DeltaTable(uri).vacuum(
        retention_hours=0, dry_run=False, enforce_retention_duration=False
    )
    assert removed  # the files the merges and the compaction replaced
    assert_equals_history(cli, table_rows(uri))
    ingest(cli, tmp_path, "2025-08-05")
    after = export(cli, uri)
    assert after["committed"] and after["sources"][0]["updated"] >= 1
    assert_equals_history(cli, table_rows(uri))
