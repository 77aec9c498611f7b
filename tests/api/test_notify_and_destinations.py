"""The public API the notify, destination, manifest and health commands
are a face over (`Ledger.notify`, `Ledger.destinations/remove_destination/
destination_lag`, `Ledger.create_manifest/manifest/manifests`), on SQLite and
PostgreSQL; each result's `to_json()` is the CLI's `--json` for the same command."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from feedledger.api.destination import DestinationLag, Manifest
from feedledger.api.notify import Correction, DeliveryStatus, Dispatched, Subscriber
from feedledger.model.jsonout import dumps


def _as_json(value: Any) -> Any:
    return json.loads(dumps(value))


def _ingest(cli: Any, tmp_path: Path, day: str, zoning: str) -> dict[str, Any]:
    path = tmp_path / f"larimer_{day}.csv"
    path.write_text(f"parcel_id,zoning\n0714-22-1,{zoning}\n0714-22-2,A\n", encoding="utf-8")
    return cli.json("ingest", "larimer", str(path))  # type: ignore[no-any-return]


def _without_ages(status: dict[str, Any]) -> dict[str, Any]:
    subs = [{**s, "oldest_pending_age_s": None} for s in status["subscribers"]]
    return {**status, "subscribers": subs}


def test_notify_through_the_api(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOOK_SECRET_I14", raising=False)
    cli("source", "add", "larimer", "--key", "parcel_id")
    hook = tmp_path / "hook.jsonl"
    with fl.open(cli.ws.config_path) as led:
        sub = led.notify.add_subscriber(
            "ops", file=hook, secret_env="HOOK_SECRET_I14", sources=["larimer"]
        )
        assert isinstance(sub, Subscriber) and sub.kind == "file"
        assert sub.target == str(hook.resolve()) and sub.sources == ("larimer",)
        assert sub.digest == "none" and sub.created_at.tzinfo is not None
        assert len(sub.warnings) == 1 and "HOOK_SECRET_I14" in sub.warnings[0]
        with pytest.raises(fl.ConfigError):
            led.notify.add_subscriber("twice", webhook="https://example.test/h", file=hook)
        with pytest.raises(fl.ConfigError):
            led.notify.add_subscriber("weld", file=hook, sources="weld")
        assert [_as_json(s) for s in led.notify.subscribers()] == cli.json("subscriber", "list")
        assert _as_json(sub) == cli.json("subscriber", "list")[0]

    run_id = _ingest(cli, tmp_path, "2026-08-01", "R-1")["run_id"]
    with fl.open(cli.ws.config_path) as led:
        status = led.notify.status()
        assert isinstance(status, DeliveryStatus)
        assert _without_ages(_as_json(status)) == _without_ages(cli.json("notify", "status"))
        seen: list[Dispatched] = []
        report = led.notify.dispatch(
            once=True, progress=lambda done, total, so_far: seen.append(so_far)
        )
        assert isinstance(report, Dispatched)
        assert report.delivered == report.attempted == report.messages_created > 0
        assert report.dead == 0 and report.errors == {}
        assert set(_as_json(report)) == set(cli.json("notify", "dispatch", "--once"))
        assert all(isinstance(s, Dispatched) for s in seen)
        assert len(hook.read_text(encoding="utf-8").splitlines()) == report.delivered
        assert led.notify.status().subscribers[0].delivered == report.delivered

        assert led.notify.retry() == 0 and led.notify.retry("ops") == 0
        assert _as_json({"requeued": 0, "subscriber": "ops"}) == cli.json(
            "notify", "retry", "--subscriber", "ops"
        )
        with pytest.raises(fl.NotFoundError):
            led.notify.retry("nobody")
        queued = led.notify.correction(run_id[:10], "zoning was misread")
        assert queued == Correction("larimer", run_id, "zoning was misread", True)
        again = cli.json("notify", "correction", run_id, "--message", "zoning was misread")
        assert _as_json(queued) == {**again, "queued": True} and again["queued"] is False
        with pytest.raises(fl.ConfigError):
            led.notify.correction(run_id, "  ")
        with pytest.raises(fl.NotFoundError):
            led.notify.correction("0" * 32, "x")

        # the correction waits in the outbox (not fanned out into a message): none cancelled
        assert led.notify.remove_subscriber("ops") == 0
        assert led.notify.subscribers() == []
        with pytest.raises(fl.NotFoundError):
            led.notify.remove_subscriber("ops")


def test_destinations_manifests_and_lag_through_the_api(cli: Any, tmp_path: Path) -> None:
    cli("source", "add", "larimer", "--key", "parcel_id")
    _ingest(cli, tmp_path, "2026-08-01", "R-1")
    with fl.open(cli.ws.config_path) as led:
        dest = led.add_destination(
            "search", source="larimer", sqlite=tmp_path / "search.db", table="parcels"
        )
        assert [d.name for d in led.destinations()] == ["search"]
        assert [_as_json(d) for d in led.destinations()] == cli.json("destination", "list")
        assert _as_json(dest) == cli.json("destination", "list")[0]

        man = led.create_manifest("X-18", source="larimer")
        assert isinstance(man, Manifest) and man.population == 2 and man.source == "larimer"
        assert man.generation == "M-1" and man.keys_from is None
        assert _as_json(led.manifest("X-18")) == cli.json("manifest", "show", "X-18")
        assert [_as_json(m) for m in led.manifests()] == cli.json("manifest", "list")
        with pytest.raises(fl.NotFoundError):
            led.manifest("nowhere")
        keys = tmp_path / "keys.txt"
        keys.write_text("0714-22-1\n", encoding="utf-8")
        assert led.create_manifest("one", source="larimer", keys_from=keys).population == 1

        rebuilt = dest.rebuild("X-18", batch=1, progress=lambda done, total, lag: None)
        assert rebuilt.outcomes[fl.Outcome.ACCEPTED] == 2

    _ingest(cli, tmp_path, "2026-08-02", "MU-2")
    at = "2026-08-03T00:00:00+00:00"
    with fl.open(cli.ws.config_path) as led:
        lag = led.destination_lag(at=datetime(2026, 8, 3, tzinfo=UTC))
        assert [type(x) for x in lag] == [DestinationLag] and lag[0].messages_behind == 1
        assert lag[0].oldest_pending_at is not None and not lag[0].paused
        shown = cli("health", "--at", at, "--json", expect=None)
        assert [_as_json(x) for x in lag] == json.loads(shown.stdout)["destinations"]
        assert led.destination_lag(["larimer"], at=datetime(2026, 8, 3, tzinfo=UTC)) == lag
        assert led.destination("search").sync_live(once=True).live_written == 1
        led.remove_destination("search")
        assert led.destinations() == [] and cli.json("destination", "list") == []
        with pytest.raises(fl.NotFoundError):
            led.remove_destination("search")
