"""A fake Socrata portal (SODA 2.x), as a pytest fixture `socrata`.

Shapes, from the Socrata developer docs (dev.socrata.com/docs/paging.html,
/docs/endpoints.html): `GET /resource/<4x4>.json?$limit=N&$offset=M&$order=:id` answers
a JSON array of row objects (column name -> value, numbers as text), stable across
pages when ordered by the system field `:id`; `GET /api/views/<4x4>.json` answers the
view's metadata, whose `rowsUpdatedAt` is the epoch second the rows last changed.
Errors: `{"error": true, "message": ...}` with a 4xx status.

`socrata.rows` (the dataset), `socrata.rows_updated_at`, and hooks for the tests:
`republish_during_paging` (how many downloads see rowsUpdatedAt change between the
first and the last page), `fail_first` (status codes answered to the first row
requests, e.g. [429]) and `html` (answer a login page instead of JSON).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from feedledger.demo.local_server import FakeServer, Reply, Request, serve

DATASET = "abcd-1234"
LOGIN_PAGE = b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>"


@dataclass
class FakeSocrata:
    rows: list[dict[str, str]] = field(default_factory=list)
    rows_updated_at: int = 1_780_000_000
    republish_during_paging: int = 0
    fail_first: list[int] = field(default_factory=list)
    html: bool = False
    hang_s: float = 0.0  # rows requests wait this long before answering
    server: FakeServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.server.base}/resource/{DATASET}.json"

    @property
    def row_requests(self) -> list[Request]:
        assert self.server is not None
        return [r for r in self.server.log if r.path.startswith("/resource/")]

    def route(self, request: Request) -> Reply:
        if self.html:
            return Reply(200, LOGIN_PAGE, "text/html; charset=utf-8")
        if request.path == f"/api/views/{DATASET}.json":
            meta = {"id": DATASET, "name": "Parcels", "rowsUpdatedAt": self.rows_updated_at}
            return Reply(200, json.dumps(meta).encode())
        if request.path != f"/resource/{DATASET}.json":
            return Reply(404, b'{"error": true, "message": "Not found"}')
        if self.fail_first:
            status = self.fail_first.pop(0)
            return Reply(
                status, b'{"error": true, "message": "slow down"}', headers={"Retry-After": "2"}
            )
        assert request.query.get("$order") == ":id"
        time.sleep(self.hang_s)
        limit = int(request.query.get("$limit", "1000"))
        offset = int(request.query.get("$offset", "0"))
        if offset == limit and self.republish_during_paging > 0:  # once per download
            self.republish_during_paging -= 1
            self.rows_updated_at += 60
        ordered = sorted(self.rows, key=lambda r: r[":id"])
        page = [
            {k: v for k, v in r.items() if k != ":id"} for r in ordered[offset : offset + limit]
        ]
        return Reply(200, json.dumps(page).encode())


@pytest.fixture(name="socrata")
def socrata_fixture() -> Iterator[FakeSocrata]:
    fake = FakeSocrata()
    with serve(fake.route) as server:
        fake.server = server
        yield fake
