"""A partition-range backfill interrupted in Dagster -- an error, or the step's process
killed (-9) -- after its second publication: materialised again, feedledger resumes
the same run (one run id) and applies the rest, nothing lost, repeated or stale."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

import feedledger as fl
from feedledger.config import Workspace
from feedledger.dagster import FeedledgerResource, feedledger_assets

PUBLICATIONS = dg.AssetKey(["feedledger", "larimer", "publications"])
PARTITIONS = "feedledger_larimer_publications"
KEYS = ["2026-08-02", "2026-08-04", "2026-08-06"]
RANGE = {
    "dagster/asset_partition_range_start": KEYS[0],
    "dagster/asset_partition_range_end": KEYS[-1],
}
ZONING = ["R-1", "MU-2", "MU-3"]
DEADLINE_S = 600  # a hang guard on a loaded machine, not a timing

# the step alone, in a process of its own: killed at the fault point
STEP = textwrap.dedent(
    """
    import sys
    import dagster as dg
    from feedledger.dagster import FeedledgerResource, feedledger_assets

    resource = FeedledgerResource(workspace=sys.argv[1], backfill_fetch=False)
    keys, start, end = sys.argv[2].split(","), sys.argv[3], sys.argv[4]
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("feedledger_larimer_publications", keys)
        key = dg.AssetKey(["feedledger", "larimer", "publications"])
        asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(key)
        tags = {"dagster/asset_partition_range_start": start,
                "dagster/asset_partition_range_end": end}
        dg.materialize([asset], instance=instance, tags=tags)
    """
)


def archived(src: fl.Source) -> None:
    for key, zoning in zip(KEYS, ZONING, strict=True):
        data = f"parcel_id,zoning\n1,{zoning}\n2,A\n".encode()
        src.archive_add(data, published_at=date.fromisoformat(key), name=f"larimer_{key}.csv")


def resumed_whole(src: fl.Source, result: dg.ExecuteInProcessResult) -> None:
    """One feedledger run, resumed once, all three publications in order."""
    assert result.success
    (run,) = src.runs()
    assert run.kind is fl.RunKind.BACKFILL and run.payloads == 3
    assert len(run.resumed) == 1
    for e in result.get_asset_materialization_events():
        meta = e.event_specific_data.materialization.metadata
        assert meta["run_id"].value == run.run_id
    history = src.history("1")
    assert [v.attributes["zoning"] for v in history] == ZONING  # none lost or repeated
    assert [v.valid_from.date().isoformat() for v in history] == KEYS
    assert src.watermark().published_at is not None
    assert src.watermark().published_at.date().isoformat() == KEYS[-1]


def test_an_error_mid_range_resumes_the_same_feedledger_run(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = ledger.source("larimer")
    archived(src)
    instance.add_dynamic_partitions(PARTITIONS, KEYS)
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    monkeypatch.setenv("FEEDLEDGER_FAULT", "after_payload:2")
    failed = dg.materialize([asset], instance=instance, tags=RANGE, raise_on_error=False)
    assert not failed.success
    (run,) = src.runs()
    assert run.payloads == 2  # the two committed stay
    monkeypatch.delenv("FEEDLEDGER_FAULT")
    resumed_whole(src, dg.materialize([asset], instance=instance, tags=RANGE))


@pytest.mark.slow
def test_a_step_killed_mid_range_resumes_the_same_feedledger_run(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    workspace: Workspace,
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    src = ledger.source("larimer")
    archived(src)
    env = {
        **os.environ,
        "FEEDLEDGER_FAULT": "after_payload:2:kill",
        "DAGSTER_HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),  # what the killed process leaves stays in the test's folder
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    args = [str(workspace.config_path), ",".join(KEYS), KEYS[0], KEYS[-1]]
    done = subprocess.run(
        [sys.executable, "-c", STEP, *args], env=env, capture_output=True, timeout=DEADLINE_S
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    (run,) = src.runs()
    assert run.payloads == 2
    instance.add_dynamic_partitions(PARTITIONS, KEYS)
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    resumed_whole(src, dg.materialize([asset], instance=instance, tags=RANGE))
