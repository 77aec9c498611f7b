"""The difference that matters: a three-day outage, then a catch-up on day 7.

    .venv/bin/python -m pytest bench/peers/test_outage.py      # part of make bench-peers-smoke

Not collected by ``make test`` (its testpaths is ``tests/``): it needs the peers'
environment ``bench/.peers`` (``make bench-peers`` / ``make bench-peers-smoke`` create it)
and takes about half a minute.

The series (``gen_parcels.py``, N = 10,000 by default, ``FEEDLEDGER_PEERS_OUTAGE_N``) runs
daily on days 1-3; on days 4-6 nothing runs; on day 7 feedledger backfills the payloads its
fetcher archived for days 4..7 (``archive add`` + ``backfill``), while dlt's ``scd2`` and
dbt's ``snapshot`` can only load day 7's file (a naive catch-up). Compared with the
publisher's files themselves:

* feedledger's history is the publisher's: every entity's versions, in order, with each
  version's ``valid_from`` = the date of the file that first showed it;
* dlt and dbt are right about what they saw (days 1, 2, 3 and 7) but lose every state that
  lived only on days 4-6, and stamp the catch-up with the load time.
"""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peerslib as lib

N = int(os.environ.get("FEEDLEDGER_PEERS_OUTAGE_N", "10000"))

pytestmark = pytest.mark.skipif(
    not os.access(lib.PEERS_PY, os.X_OK),
    reason="needs the peers' environment bench/.peers (make bench-peers-smoke creates it)",
)


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    lib.offline_env()
    files = lib.series(N, lib.OUTAGE_CATCHUP)
    result = lib.outage(files, tmp_path_factory.mktemp("outage"))
    result["files"] = files
    return result


def _pair(outage: dict[str, Any], pair: str) -> dict[str, Any]:
    return dict(outage["compare"]["pairs"][pair])


def test_feedledger_history_is_the_publishers(outage: dict[str, Any]) -> None:
    assert _pair(outage, "truth~feedledger")["mismatches"] == 0
    assert outage["compare"]["feedledger_valid_from_differs_from_publisher_date"] == 0
    steps = outage["backfill"]["steps"]
    assert [s["published_at"][:10] for s in steps] == [
        f.published_at for f in outage["files"] if f.day >= 4
    ]


def test_peers_are_right_about_what_they_saw(outage: dict[str, Any]) -> None:
    assert _pair(outage, "expected~dlt")["mismatches"] == 0
    assert _pair(outage, "expected~dbt")["mismatches"] == 0


def test_peers_lose_the_outage_days(outage: dict[str, Any]) -> None:
    tools = outage["compare"]["tools"]
    for peer in ("dlt", "dbt"):
        lost = _pair(outage, f"truth~{peer}")["mismatches"]
        assert lost > 0, f"{peer} should miss states that lived only on days 4-6"
        assert tools[peer]["versions"] == tools["expected"]["versions"]
        assert tools[peer]["versions"] < tools["truth"]["versions"]
    assert tools["feedledger"]["versions"] == tools["truth"]["versions"]


def test_one_parcel_side_by_side(
    outage: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    h = outage["show"]["histories"]
    with capsys.disabled():
        print(f"\n\nOutage (N = {outage['n']:,}): days 1-3 daily, 4-6 not run, day 7 catch-up.")
        print("feedledger: " + "; ".join(outage["feedledger_commands"]) + "\n")
        print(outage["markdown"] + "\n")
    publisher_dates = {f.published_at for f in outage["files"]}
    truth_dates = [v["valid_from"][:10] for v in h["truth"]]
    # feedledger: one version per state, each valid from its publisher date (CLI agrees)
    assert [v["valid_from"][:10] for v in h["feedledger"]] == truth_dates
    cli = outage["feedledger_history_cli"]
    assert [v["valid_from"][:10] for v in cli] == truth_dates
    assert any(v["backfill"] for v in cli), "the day 4-7 versions come from the backfill"
    assert any(d in ("2026-08-04", "2026-08-05") for d in truth_dates)
    # dlt and dbt: fewer versions, and the catch-up stamped with the load time
    today = date.today().isoformat()
    for peer in ("dlt", "dbt"):
        assert len(h[peer]) < len(h["truth"]) or outage["changes_in_window"] == 1
        newest = h[peer][-1]["valid_from"][:10]
        assert newest not in publisher_dates
        assert newest == today
