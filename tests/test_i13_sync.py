"""Issue 13, destinations: a rebuild that fails recording verdicts loses no batch and
reconcile names the keys without a verdict (7), destination names validated (19),
quoted table identifiers (20), `sync-explain` (23), live lag in `health` and rebuild
progress lines (24), human output of reconcile / manifest show / sync --live --once
(25), SIGTERM and failing transforms in `sync` (28), a non-UTF-8 --keys-from (15).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Cli
from test_sync import SRC, base, declare, dest_kind, place, supplier_day  # noqa: F401

# -- 19: destination names -------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../../x", "a/b", "", "_x", ".hidden", "x" * 65, "a b"])
def test_destination_names_are_validated_like_source_names(
    cli: Cli, tmp_path: Path, bad: str
) -> None:
    cli("source", "add", SRC, "--key", "id")
    got = cli("destination", "add", bad, "--source", SRC, "--sqlite",
              str(tmp_path / "d.db"), "--table", "t", expect=2)  # fmt: skip
    assert "destination name" in got.stderr and "letters, digits" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert cli.json("destination", "list") == []
    assert not (tmp_path / "d.db").exists()
