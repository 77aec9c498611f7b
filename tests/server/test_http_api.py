"""The HTTP API of `feedledger serve`, over FastAPI's TestClient on SQLite
and PostgreSQL: every endpoint, the same JSON as the CLI's --json, cursor pagination,
problem details (404, 422, 401, 403) that leak no secret or outside path, writes
recorded in the audit, a streamed snapshot. The real process (SIGTERM) is in
server/test_serve_process.py."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.api.snapshot_stream import CHUNK_CHARS
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens
from helpers import BACKENDS, Cli, backend_store, migrate

TOKEN = "alice:s3cret-token"
AUTH = {"Authorization": "Bearer s3cret-token"}


def _csv(rows: dict[str, str]) -> bytes:
    return ("id,v\n" + "".join(f"{k},{v}\n" for k, v in rows.items())).encode()


def _build(led: fl.Ledger, tmp: Path) -> dict[str, Any]:
    """s: 30 ids over 4 days, the 4th a burst held for review; pair: a compound key;
    a destination of s (SQLite file) synced live once."""
    s = led.add_source("s", key=["id"], timezone="UTC", hold_factor=5, hold_min_changes=10)
    led.notify.add_subscriber("f", file=tmp / "sub.jsonl", sources=["s"])
    base = {str(i): "a" for i in range(30)}
    s.ingest(_csv(base), published_at="2026-08-01", name="s_1.csv")
    dest = led.add_destination("copy", source="s", table="s_copy", sqlite=tmp / "dest.db")
    s.ingest(_csv({**base, "0": "b"}), published_at="2026-08-02", name="s_2.csv")
    s.ingest(_csv({**base, "0": "b", "1": "c"}), published_at="2026-08-03", name="s_3.csv")
    burst = s.ingest(_csv(dict.fromkeys(base, "z")), published_at="2026-08-04", name="s_4.csv")
    assert burst.held_for_review
    led.notify.dispatch(once=True)
    pair = led.add_source("pair", key=["a", "b"], timezone="UTC")
    pair.ingest(b'a,b,v\nx,1,one\n"y,z",2,two\n', published_at="2026-08-01", name="p.csv")
    dest.sync_live(once=True)
    dest.create_manifest("m1")
    dest.rebuild("m1", batch=8)
    dest.reconcile("m1")
    sup = led.add_source("sup", key=["id"], timezone="UTC", revision="rev", kind="changes")
    sup.ingest(b"id,rev,name\nA,8,a\nB,8,b\nC,8,c\n", published_at="2026-08-01", name="u1.csv")
    mixed = sup.ingest(
        b"id,rev,name\nA,7,old\nB,8,other\nC,9,c2\nD,1,d\nE,1,e\n",
        published_at="2026-08-02",
        name="u2.csv",
    )  # A superseded, B unresolved, C changed, D and E added
    return {"burst": burst.run_id, "mixed": mixed.run_id}


class Site:
    def __init__(self, ws: Workspace, client: TestClient, facts: dict[str, Any]) -> None:
        self.ws = ws
        self.client = client
        self.facts = facts
        self.cli = Cli(ws)

    def get(self, url: str, status: int = 200, **kw: Any) -> Any:
        r = self.client.get(url, **kw)
        assert r.status_code == status, (url, r.status_code, r.text)
        kind = r.headers.get("content-type", "")
        return r.json() if kind in ("application/json", "application/problem+json") else r


def _site(backend: str, tmp: Path, tokens: str | None) -> Iterator[Site]:
    with backend_store(backend, tmp) as url:
        ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as led:
            facts = _build(led, tmp)
        app = create_app(functools.partial(fl.open, ws.config_path), parse_tokens(tokens))
        with TestClient(app) as client:
            yield Site(Workspace.load(ws.config_path), client, facts)


@pytest.fixture(scope="module", params=BACKENDS)
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """A read-mostly site shared by the module's read tests (writes go to `writable`)."""
    yield from _site(request.param, tmp_path_factory.mktemp("site"), TOKEN)


@pytest.fixture(params=BACKENDS)
def writable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    yield from _site(request.param, tmp_path, TOKEN)


# -- reads ---------------------------------------------------------------------------------


def test_health_and_strict(site: Site) -> None:
    body = site.get("/api/health")
    assert body == {**body, "ok": False} and set(body["stale"]) == {"s", "pair", "sup"}
    assert {h["source"] for h in body["sources"]} == {"s", "pair", "sup"}
    assert body["destinations"][0]["destination"] == "copy"
    problem = site.get("/api/health?strict=1", 503)
    assert problem["stale"] == body["stale"]


def test_sources_and_source(site: Site) -> None:
    items = site.get("/api/sources")
    assert [i["name"] for i in items] == ["s", "pair", "sup"]
    assert items[1]["key"] == ["a", "b"] and items[0]["health"]["status"] == "stale"
    one = site.get("/api/sources/s")
    assert one["declaration"]["hold_factor"] == 5 and one["cadence"] == "daily"
    assert one["watermark"] == site.cli.json("watermark", "s")
    assert one["gaps"] == site.cli.json("gaps", "s") and one["frozen"] is False
    assert [r["run_id"] for r in one["runs"]] == [
        r["run_id"] for r in reversed(site.cli.json("runs", "s"))
    ]


def test_history_and_asof_are_the_cli_json(site: Site) -> None:
    assert site.get("/api/sources/s/entities/0/history") == site.cli.json("history", "s", "0")
    for q, args in [
        ("valid=2026-08-02", ["--valid", "2026-08-02"]),
        ("valid=2026-08-02T12:00:00Z&known_at=2020-01-01", ["--valid", "2026-08-02T12:00:00Z",
                                                             "--known-at", "2020-01-01"]),
    ]:  # fmt: skip
        got = site.get(f"/api/sources/s/entities/0/asof?{q}")
        assert got == site.cli.json("asof", "s", "0", *args)
    known = site.get("/api/sources/s/entities/0/history?known_at=2000-01-01")
    assert known == []
    gaps = site.get("/api/sources/s/entities/0/history?with_gaps=1")
    assert {g["type"] for g in gaps} == {"version"}


def test_compound_keys(site: Site) -> None:
    want = site.cli.json("history", "pair", '["y,z","2"]')
    assert want and want[0]["attributes"]["v"] == "two"
    assert site.get("/api/sources/pair/entities/y%5C,z,2/history") == want  # y\,z,2
    assert site.get("/api/sources/pair/entities/%5B%22y,z%22,%222%22%5D/history") == want
    assert site.get("/api/sources/pair/entities/x,1/asof?valid=2026-08-02")["status"] == "present"
    bad = site.get("/api/sources/pair/entities/x/history", 422)
    assert "2 comma-separated values" in bad["detail"]


def test_runs_pages_cover_every_run_once(site: Site) -> None:
    every = site.get("/api/runs?limit=1000")["runs"]
    assert len(every) == 7 and every[0]["started_at"] >= every[-1]["started_at"]
    seen: list[str] = []
    cursor = ""
    while True:
        page = site.get(f"/api/runs?limit=2&cursor={cursor}")
        seen += [r["run_id"] for r in page["runs"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert seen == [r["run_id"] for r in every]
    only = site.get("/api/runs?source=s&kind=live&status=held")["runs"]
    assert [r["run_id"] for r in only] == [site.facts["burst"]]
    assert [r["run_id"] for r in site.get("/api/review")["runs"]] == [site.facts["burst"]]
    assert site.get("/api/runs?cursor=!!nope", 422)["status"] == 422
    assert "unknown run status" in site.get("/api/runs?status=bogus", 422)["detail"]
    assert site.get("/api/runs?source=nope", 404)["title"] == "Not found"
    assert site.get("/api/runs?limit=0", 422)["type"].endswith("invalid-request")


def test_run_detail_and_changes_paged(site: Site) -> None:
    run = site.facts["burst"]
    detail = site.get(f"/api/runs/{run[:8]}")
    assert detail["run_id"] == run and detail["status"] == "held"
    assert detail["retracted"] is False and detail["audit"] == []
    assert {n["topic"] for n in detail["notices"]} and all(
        n["status"] == "held" for n in detail["notices"]
    )
    first = site.get("/api/runs?source=s")["runs"][-1]
    sent = site.get(f"/api/runs/{first['run_id']}")["notices"]
    assert sent and all(
        n["deliveries"] == {"f": {"delivered": n["changes"]}}
        for n in sent
        if n["topic"] == "changes"
    )
    assert all(n["deliveries"] == {} for n in detail["notices"])  # held: not fanned out
    want = site.cli.json("changes", "--run", run)
    assert len(want) == 30
    for limit in (7, 10, 30, 1000):  # pages ending inside, at the end, past the end
        got: list[Any] = []
        cursor = ""
        while True:
            page = site.get(f"/api/runs/{run}/changes?limit={limit}&cursor={cursor}")
            assert page["total"] == len(want) and len(page["changes"]) <= limit
            got += page["changes"]
            if page["next_cursor"] is None:
                break
            cursor = page["next_cursor"]
        assert got == want
    assert site.get(f"/api/runs/{run}/changes?cursor=WyJ4Il0", 422)["status"] == 422
    mixed = site.facts["mixed"]
    want = site.cli.json("changes", "--run", mixed)
    assert [c.get("outcome") for c in want] == [None, None, None, "superseded", "unresolved"]
    for limit in (1, 2, 3, 4, 5):
        got, cursor = [], ""
        while True:
            page = site.get(f"/api/runs/{mixed}/changes?limit={limit}&cursor={cursor}")
            assert page["total"] == 5
            got += page["changes"]
            if page["next_cursor"] is None:
                break
            cursor = page["next_cursor"]
        assert got == want, limit


def test_destination_and_explain(site: Site) -> None:
    body = site.get("/api/destinations/copy")
    assert body["source"] == "s" and body["outcomes"]["live"]["accepted"] >= 2
    assert body["lag"]["destination"] == "copy" and body["unresolved"] == []
    last = body["last_reconcile"]
    assert last["manifest"] == "m1" and last["population"] == 30 and last["at"]
    assert {k: v for k, v in last.items() if k != "at"} == site.cli.json(
        "reconcile", "copy", "--manifest", "m1"
    )
    [rebuild] = body["rebuilds"]
    assert rebuild["manifest"] == "m1" and rebuild["population"] == 30
    point = rebuild["checkpoint"]
    assert point["status"] == "finished" and point["batches"] == 4
    assert point["attempted_key"] == point["acknowledged_key"]
    assert sum(body["outcomes"]["m1"].values()) == rebuild["judged"] == 30
    assert site.get("/api/destinations")[0]["name"] == "copy"
    assert site.get("/api/destinations/copy/keys/0") == site.cli.json("sync-explain", "copy", "0")
    assert site.get("/api/destinations/nope", 404)["status"] == 404


def test_snapshot_streams_each_format(site: Site) -> None:
    r = site.get("/api/sources/s/snapshot?valid=2026-08-03&format=csv")
    lines = r.text.splitlines()
    assert lines[0] == "id,v" and len(lines) == 31 and "1,c" in lines
    assert r.headers["content-type"].startswith("text/csv")
    out = site.cli("snapshot", "s", "--valid", "2026-08-03", "--format", "jsonl").stdout
    r = site.get("/api/sources/s/snapshot?valid=2026-08-03&format=jsonl")
    assert r.text == out
    assert site.get("/api/sources/s/snapshot?valid=2026-08-03&format=xml", 422)["status"] == 422
    assert site.get("/api/sources/s/snapshot?valid=08/03", 422)["status"] == 422
    assert "geojson" in site.get("/api/sources/s/snapshot?valid=2026-08-03&format=geojson",
                                 422)["detail"]  # fmt: skip


def test_problem_details(site: Site) -> None:
    for url, status in [
        ("/api/sources/nope", 404),
        ("/api/sources/s/entities/nobody/history", 404),
        ("/api/runs/deadbeef", 404),
        ("/api/sources/s/entities/0/asof", 422),  # valid missing (FastAPI's own)
        ("/api/sources/s/entities/0/asof?valid=yesterday", 422),
        ("/api/nothing-here", 404),
    ]:
        r = site.client.get(url)
        assert r.status_code == status, url
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert set(body) == {"type", "title", "status", "detail", "instance"}
        assert body["status"] == status and body["instance"].startswith(url.split("?")[0])
    assert site.get("/api/runs/x", 404)["detail"].startswith("unknown run id")


def test_openapi_lists_the_endpoints(site: Site) -> None:
    paths = site.get("/openapi.json")["paths"]
    for p in ["/api/health", "/api/sources/{source}/entities/{key}/asof", "/api/runs/{run_id}",
              "/api/runs/{run_id}/review", "/api/destinations/{name}/keys/{key}"]:  # fmt: skip
        assert p in paths
    assert site.client.get("/docs").status_code == 200


# -- writes --------------------------------------------------------------------------------


def test_writes_refused_without_a_good_token(site: Site) -> None:
    run = site.facts["burst"]
    for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}]:
        r = site.client.post(f"/api/runs/{run}/review", json={"action": "release"},
                             headers=headers)  # fmt: skip
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert r.headers["content-type"] == "application/problem+json"
        assert "s3cret" not in r.text
    assert site.get(f"/api/runs/{run}")["status"] == "held"


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_server_refuses_writes(backend: str, tmp_path: Path) -> None:
    for s in _site(backend, tmp_path, None):
        r = s.client.post("/api/sources/s/freeze", headers=AUTH)
        assert r.status_code == 403 and r.json()["type"].endswith("read-only")
        assert s.get("/api/health")["sources"][0]["frozen"] is False


def test_writes_are_done_and_audited(writable: Site) -> None:
    run = writable.facts["burst"]
    c = writable.client
    bad = c.post(f"/api/runs/{run}/review", json={"action": "maybe"}, headers=AUTH)
    assert bad.status_code == 422
    r = c.post(f"/api/runs/{run}/review", json={"action": "release"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["result"]["action"] == "released"
    again = c.post(f"/api/runs/{run}/review", json={"action": "release"}, headers=AUTH)
    assert again.status_code == 422  # not held any more (ConfigError)
    detail = writable.get(f"/api/runs/{run}")
    assert detail["status"] == "succeeded"
    [entry] = detail["audit"]
    assert entry["actor"] == "alice" and entry["action"] == "review-release"
    assert entry["detail"]["request"] == {"action": "release"}

    frozen = c.post("/api/sources/s/freeze", json={"reason": "audit"}, headers=AUTH).json()
    assert frozen["result"]["frozen"] is True and frozen["audit"]["source"] == "s"
    source = writable.get("/api/sources/s")
    assert source["frozen"] is True and source["audit"][-1]["action"] == "freeze"
    thawed = c.post("/api/sources/s/thaw", headers=AUTH).json()
    assert thawed["result"] == {"source": "s", "frozen": False, "changed": True}

    runs = writable.get("/api/runs?source=s")["runs"]
    first = runs[-1]["run_id"]
    conflict = c.post(f"/api/runs/{first}/retract", json={"cascade": False}, headers=AUTH)
    assert conflict.status_code == 409 and conflict.json()["type"].endswith("retract-conflict")
    done = c.post(f"/api/runs/{run}/retract", json={}, headers=AUTH)
    assert done.status_code == 200, done.text
    detail = writable.get(f"/api/runs/{run}")
    assert detail["retracted"] is True and detail["retracted_by"] == [
        done.json()["result"]["run_id"]
    ]
    assert [a["action"] for a in detail["audit"]] == ["review-release", "retract"]
    assert writable.cli.json("history", "s", "5")[-1]["attributes"]["v"] == "a"


# -- errors leak nothing ---------------------------------------------------------------------


def test_errors_hide_secrets_and_outside_paths(tmp_path: Path) -> None:
    from feedledger.server.problems import Scrubber

    root = tmp_path / "ws"
    (root / "feed").mkdir(parents=True)
    scrub = Scrubber(root, ["s3cret-token"])
    text = scrub(
        f"cannot read {root}/feed/a.csv nor /etc/passwd with s3cret-token via "
        "postgresql://u:hunter2@db:5432/x"
    )
    assert text == "cannot read feed/a.csv nor <path> with *** via postgresql://u:***@db:5432/x"
    from feedledger.server.problems import hide_password

    assert (
        hide_password("https://me:pw@portal.example/x.csv") == "https://me:***@portal.example/x.csv"
    )


def test_unexpected_errors_say_nothing_inside(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError(f"secret at {Path('/root/private').as_posix()}")

    monkeypatch.setattr(fl.Ledger, "health", boom)
    client = TestClient(site.client.app, raise_server_exceptions=False)
    r = client.get("/api/health")
    assert r.status_code == 500 and "private" not in r.text
    assert r.json()["detail"] == "an unexpected error; see the server's log"


def test_a_large_snapshot_streams_in_chunks(tmp_path: Path) -> None:
    """~20k rows come in several chunks (the 1M-row memory figure is bench/http_bench.py)."""
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    migrate(ws.store_url)
    with fl.open(ws.config_path) as led:
        src = led.add_source("big", key=["id"], timezone="UTC")
        body = "id,name\n" + "".join(f"{i},name-{i:06d}\n" for i in range(20_000))
        src.ingest(body.encode(), published_at="2026-08-01", name="big.csv")
        # JSON lines come a line at a time from the writer, gathered in chunks; CSV in
        # the writer's own 1 MiB blocks
        lines = list(led.source("big").snapshot_chunks(valid=date(2026, 8, 2), format="jsonl"))
        assert len(lines) > 1 and all(len(c) <= 2 * CHUNK_CHARS for c in lines)
        assert "".join(lines).count("\n") == 20_000
        chunks = list(led.source("big").snapshot_chunks(valid=date(2026, 8, 2)))
        # a reader that stops early stops the writer thread
        early = led.source("big").snapshot_chunks(valid=date(2026, 8, 2), format="jsonl")
        assert next(early)
        early.close()  # type: ignore[attr-defined]
    app = create_app(lambda: fl.open(ws.config_path))
    with TestClient(app) as client:
        r = client.get("/api/sources/big/snapshot?valid=2026-08-02&format=csv")
    assert r.status_code == 200 and r.text == "".join(chunks)
    lines = r.text.splitlines()
    assert lines[0] == "id,name" and len(lines) == 20_001 == len(set(lines))
