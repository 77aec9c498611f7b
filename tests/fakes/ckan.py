"""A fake CKAN portal (API v3), as a pytest fixture `ckan`.

Shapes, from the CKAN API guide (docs.ckan.org/en/latest/api/): `GET
/api/3/action/package_show?id=NAME` answers `{"help": ..., "success": true, "result":
{"name", "metadata_modified", "resources": [{"id", "name", "url", "format",
"last_modified"}]}}` (timestamps ISO-8601 without an offset, UTC); errors come as
`{"help": ..., "success": false, "error": {"__type": "Not Found Error", "message":
"Not found"}}` with a 4xx status. A resource's `url` serves its file.

`ckan.resources` (name -> (format, bytes, last_modified or None)),
`ckan.metadata_modified`, and hooks: `fail` (answer success:false) and `html`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from feedledger.demo.local_server import FakeServer, Reply, Request, serve

DATASET = "parcels"


@dataclass
class FakeCkan:
    resources: dict[str, tuple[str, bytes, str | None]] = field(default_factory=dict)
    metadata_modified: str = "2026-06-01T08:00:00.123456"
    fail: bool = False
    duplicate_name: str | None = None
    html_downloads: bool = False  # resource urls answer as text/html (a login page)
    server: FakeServer | None = None

    @property
    def base(self) -> str:
        assert self.server is not None
        return self.server.base

    @property
    def url(self) -> str:
        return f"{self.base}/dataset/{DATASET}"

    @property
    def downloads(self) -> list[Request]:
        assert self.server is not None
        return [r for r in self.server.log if r.path.startswith("/download/")]

    def _resource(self, i: int, name: str) -> dict[str, object]:
        fmt, _data, modified = self.resources[name]
        return {
            "id": f"res-{i}",
            "name": name,
            "url": f"{self.base}/download/{name}",
            "format": fmt,
            "last_modified": modified,
            "package_id": "pkg-1",
        }

    def route(self, request: Request) -> Reply:
        if request.path == "/api/3/action/package_show":
            help_url = f"{self.base}/api/3/action/help_show?name=package_show"
            if self.fail or request.query.get("id") != DATASET:
                body = {
                    "help": help_url,
                    "success": False,
                    "error": {"__type": "Not Found Error", "message": "Not found"},
                }
                return Reply(404, json.dumps(body).encode())
            listed = [self._resource(i, n) for i, n in enumerate(self.resources)]
            if self.duplicate_name:
                listed.append({**self._resource(0, self.duplicate_name), "id": "res-dup"})
            result = {
                "name": DATASET,
                "metadata_modified": self.metadata_modified,
                "resources": listed,
            }
            return Reply(
                200, json.dumps({"help": help_url, "success": True, "result": result}).encode()
            )
        if request.path.startswith("/download/"):
            fmt, data, _modified = self.resources[request.path.removeprefix("/download/")]
            kind = {"CSV": "text/csv", "JSON": "application/json"}.get(
                fmt, "application/octet-stream"
            )
            return Reply(200, data, "text/html" if self.html_downloads else kind)
        return Reply(404, b"<html>not found</html>", "text/html")


@pytest.fixture(name="ckan")
def ckan_fixture() -> Iterator[FakeCkan]:
    fake = FakeCkan()
    with serve(fake.route) as server:
        fake.server = server
        yield fake
