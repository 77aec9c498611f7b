"""A killed `export delta` resumes with nothing lost and nothing twice: at each
boundary -- its rows built and the Delta commit not made (`delta_before_commit`), the
commit made and the store's position not saved (`delta_after_commit`) -- the process
is killed (SIGKILL) or fails (an injected error); the next export finds the table's own
position (its app transaction), puts the store's right, and the table then equals the
ledger's history. On SQLite and PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from helpers import Cli
from lake.delta_scenario import (
    SRC,
    assert_equals_history,
    declare,
    export,
    ingest,
    position,
    table_rows,
)


def stored_position(cli: Cli, uri: str) -> str | None:
    found = [p for p in cli.json("export", "status", "--to", uri) if p["source"] == SRC]
    return found[0]["known_at"] if found else None


@pytest.mark.slow
@pytest.mark.parametrize("point", ["delta_before_commit", "delta_after_commit"])
@pytest.mark.parametrize("how", ["kill", "error"])
def test_a_killed_export_resumes_without_loss_or_repeat(
    cli: Cli, tmp_path: Path, point: str, how: str
) -> None:
    uri = str(tmp_path / "lake")
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    ingest(cli, tmp_path, "2025-08-02")
    export(cli, uri)
    before = stored_position(cli, uri)
    ingest(cli, tmp_path, "2025-08-04")  # changes exported rows' valid_to: a merge

    fault = f"{point}:kill" if how == "kill" else point
    done = cli.proc("export", "delta", SRC, "--to", uri, "--json", env={"FEEDLEDGER_FAULT": fault})
    if how == "kill":
        assert done.returncode == -signal.SIGKILL, done.stderr
    else:
        assert done.returncode == 1 and "injected failure" in done.stderr, done.stderr
    committed = point == "delta_after_commit"
    import deltalake

    assert deltalake.DeltaTable(uri).version() == (1 if committed else 0)
    assert stored_position(cli, uri) == before  # the store's copy not saved either way

    again = export(cli, uri)
    if committed:  # the commit was made: nothing written again, the store put right
        assert again["sources"][0]["resumed"] and not again["committed"]
        assert again["delta_version"] == 1
    else:
        assert again["committed"] and again["delta_version"] == 1
    assert stored_position(cli, uri) == _iso(position(uri))
    rows = table_rows(uri)
    assert_equals_history(cli, rows)

    ingest(cli, tmp_path, "2025-08-05")  # and it goes on from there
    last = export(cli, uri)
    assert last["committed"] and last["delta_version"] == 2
    assert not last["sources"][0]["resumed"]
    assert_equals_history(cli, table_rows(uri))


def _iso(us: int | None) -> str | None:
    from lake.delta_scenario import iso_us

    return None if us is None else iso_us(us)
