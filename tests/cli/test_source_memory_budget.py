"""`source add --memory-budget`: a size as people write it, stored in bytes in the
source's table; a size that is not one, or one below 64 MiB, is one clear line (exit 2)."""

from __future__ import annotations

import tomllib

import pytest

from feedledger.config import Workspace
from feedledger.model.sizes import format_size, parse_size
from helpers import Cli


def test_memory_budget_is_stored_in_bytes(cli: Cli, workspace: Workspace) -> None:
    cli("source", "add", "parcels", "--key", "parcel_id", "--memory-budget", "1GiB")
    table = tomllib.loads(workspace.config_path.read_text())["sources"]["parcels"]
    assert table["memory_budget"] == 1024**3
    assert Workspace.load(workspace.config_path).source("parcels").memory_budget == 1024**3
    cli("source", "add", "other", "--key", "id")
    assert Workspace.load(workspace.config_path).source("other").memory_budget is None


@pytest.mark.parametrize(
    ("given", "said"),
    [("lots", "is not a size"), ("1MiB", "below the smallest memory budget, 64MiB")],
)
def test_a_bad_memory_budget_is_one_line(cli: Cli, given: str, said: str) -> None:
    result = cli("source", "add", "parcels", "--key", "id", "--memory-budget", given, expect=2)
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_sizes_read_as_written() -> None:
    assert parse_size("512MiB") == 512 * 1024**2
    assert parse_size("2 GB") == 2 * 1000**3
    assert parse_size("1.5G") == 3 * 1024**3 // 2
    assert parse_size(4096) == 4096
    assert format_size(3 * 1024**3 // 2) == "1.5 GiB"
    with pytest.raises(ValueError, match="not a size"):
        parse_size(True)
