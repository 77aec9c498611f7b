"""A snapshot inside a recorded gap says so in every face: the Python API warns
(`GapWarning`) or, strict, refuses (`InGap` naming the gap); the HTTP snapshot carries
`Feedledger-Gap: <start>/<end>` or, `?strict=1`, answers 409 with a problem naming the
gap; OpenAPI documents both; the CLI's `snapshot` warns or refuses (exit 2). And an
`asof` before the source's first observation is `not_observed`, not `absent`; a key the
source never had is exit 3 / HTTP 404 for `asof` as for `history`. SQLite and
PostgreSQL."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens
from helpers import Cli


def _csv(rows: dict[str, str]) -> bytes:
    return ("id,v\n" + "".join(f"{k},{v}\n" for k, v in rows.items())).encode()


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    """Source `s` (UTC): first published 2026-07-03T15:30Z, again 2026-07-10; a gap
    recorded for 07-05 .. 07-07."""
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(_csv({"a": "1", "b": "2"}), published_at=datetime(2026, 7, 3, 15, 30, tzinfo=UTC))
        s.ingest(_csv({"a": "9", "b": "2"}), published_at=date(2026, 7, 10))
        s.add_gap(date(2026, 7, 5), date(2026, 7, 7), "portal down")
    return Workspace.load(workspace.config_path)


@pytest.fixture
def client(ws: Workspace) -> Iterator[TestClient]:
    app = create_app(functools.partial(fl.open, ws.config_path), parse_tokens(None))
    with TestClient(app) as c:
        yield c


def test_python_snapshot_inside_a_gap_warns_and_strict_raises(ws: Workspace) -> None:
    with fl.open(ws.config_path) as led:
        src = led.source("s")
        inside = date(2026, 7, 6)
        with pytest.warns(fl.GapWarning, match="portal down") as caught:
            frame = src.snapshot(valid=inside)
        assert issubclass(fl.GapWarning, UserWarning)
        assert sorted(frame["v"].to_list()) == ["1", "2"]  # the state as last observed
        gap = caught[0].message.gap  # type: ignore[union-attr]
        assert gap.gap.start == datetime(2026, 7, 5, tzinfo=UTC)
        with pytest.warns(fl.GapWarning):
            batches = list(src.snapshot_batches(valid=inside))
        assert sum(b.num_rows for b in batches) == 2
        with pytest.warns(fl.GapWarning):
            assert src.export_snapshot(ws.root / "out.csv", valid=inside) == 2
        for call in (
            lambda: src.snapshot(valid=inside, strict=True),
            lambda: src.snapshot_batches(valid=inside, strict=True),
            lambda: src.export_snapshot(ws.root / "strict.csv", valid=inside, strict=True),
        ):
            with pytest.raises(fl.InGap) as refused:
                call()
            text = str(refused.value)
            assert "2026-07-05" in text and "2026-07-08" in text and "portal down" in text
            assert "\n" not in text and refused.value.gap.gap.reason == "portal down"
        assert not (ws.root / "strict.csv").exists()
        # outside every gap: no warning, and strict reads as usual
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert src.snapshot(valid=date(2026, 7, 11), strict=True)["v"].to_list() == ["9", "2"]
            src.export_snapshot(ws.root / "ok.csv", valid=date(2026, 7, 4), strict=True)
        # the typed gap answer: datetimes, not text
        found = src.snapshot_gap(valid=inside)
        assert found is not None
        assert found.last_observed_at == datetime(2026, 7, 3, 15, 30, tzinfo=UTC)
        assert found.next_observed_at == datetime(2026, 7, 10, tzinfo=UTC)


def test_http_snapshot_inside_a_gap_has_the_header_and_strict_is_409(client: TestClient) -> None:
    r = client.get("/api/sources/s/snapshot?valid=2026-07-06")
    assert r.status_code == 200
    assert r.headers["Feedledger-Gap"] == "2026-07-05T00:00:00+00:00/2026-07-08T00:00:00+00:00"
    assert r.text.splitlines()[1:] == ["a,1", "b,2"]
    r = client.get("/api/sources/s/snapshot?valid=2026-07-06&strict=1&format=jsonl")
    assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["type"] == "urn:feedledger:problem:in-gap"
    assert "portal down" in problem["detail"] and "2026-07-05" in problem["detail"]
    ok = client.get("/api/sources/s/snapshot?valid=2026-07-11&strict=1")
    assert ok.status_code == 200 and "Feedledger-Gap" not in ok.headers
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/sources/{source}/snapshot"]["get"]
    assert "Feedledger-Gap" in op["responses"]["200"]["headers"]
    assert "409" in op["responses"]
    assert any(p["name"] == "strict" for p in op["parameters"])


def test_cli_snapshot_inside_a_gap_warns_and_strict_refuses(ws: Workspace) -> None:
    cli = Cli(ws)
    warned = cli("snapshot", "s", "--valid", "2026-07-06")
    assert "portal down" in warned.stderr and warned.stdout.splitlines()[1:] == ["a,1", "b,2"]
    assert "GapWarning" not in warned.stderr  # said once, in the CLI's words
    refused = cli("snapshot", "s", "--valid", "2026-07-06", "--strict", expect=2)
    assert refused.stdout == "" and "portal down" in refused.stderr


def test_asof_before_the_first_observation_is_not_observed(ws: Workspace, client: Any) -> None:
    cli = Cli(ws)
    for valid in ("2026-07-01", "2026-07-03", "2026-07-03T15:29:59Z"):
        answer = cli.json("asof", "s", "a", "--valid", valid)
        assert answer["status"] == "not_observed", (valid, answer)
        assert answer["gap"] is None and answer["last_observed"] is None
        assert answer["next_observed_at"] == "2026-07-03T15:30:00+00:00"
        assert answer["next_observed"]["attributes"] == {"id": "a", "v": "1"}
        http = client.get(f"/api/sources/s/entities/a/asof?valid={valid}")
        assert http.status_code == 200 and http.json() == answer
    assert (
        "before the first observation of s" in cli("asof", "s", "a", "--valid", "2026-07-01").stdout
    )
    assert cli.json("asof", "s", "a", "--valid", "2026-07-03T15:30:00Z")["status"] == "present"
    with fl.open(ws.config_path) as led:
        got = led.source("s").asof("a", valid=date(2026, 7, 3))
        assert got.status is fl.Presence.NOT_OBSERVED and got.gap is None
        assert got.next_observed_at == datetime(2026, 7, 3, 15, 30, tzinfo=UTC)
        # a key the source never had: NotFound, as history
        with pytest.raises(fl.NotFoundError, match="has ever been recorded"):
            led.source("s").asof("zz", valid=date(2026, 7, 4))
        with pytest.raises(fl.NotFoundError, match="has ever been recorded"):
            led.source("s").history("zz")


def test_a_key_the_source_never_had_is_not_found_for_asof_and_history(
    ws: Workspace, client: TestClient
) -> None:
    cli = Cli(ws)
    for args in (["asof", "s", "zz", "--valid", "2026-07-04"], ["history", "s", "zz"]):
        err = cli(*args, expect=3).stderr
        assert "no entity with key 'zz' has ever been recorded" in err, err
    for url in (
        "/api/sources/s/entities/zz/asof?valid=2026-07-04",
        "/api/sources/s/entities/zz/history",
    ):
        r = client.get(url)
        assert r.status_code == 404 and "has ever been recorded" in r.json()["detail"]
    # answers that hold for every key still answer: inside a gap, before the first
    # observation
    assert cli.json("asof", "s", "zz", "--valid", "2026-07-06")["status"] == "not_observed"
    assert cli.json("asof", "s", "zz", "--valid", "2026-07-01")["status"] == "not_observed"
