"""A tiny threaded HTTP server on 127.0.0.1 whose answers come from a Python callable,
with a log of every request (path and query) to count and assert on: under the demo's
FeatureServer (demo/featureserver.py) and the tests' other fakes (tests/fakes/)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    path: str
    query: dict[str, str]


Route = Callable[[Request], Reply]


@dataclass
class FakeServer:
    route: Route
    base: str = ""
    log: list[Request] = field(default_factory=list)


@contextmanager
def serve(route: Route) -> Iterator[FakeServer]:
    fake = FakeServer(route)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            request = Request(parts.path, query)
            fake.log.append(request)
            reply = fake.route(request)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a deadline test)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    # serve_forever checks for shutdown every poll_interval (0.5 s by default): each
    # test's teardown would wait up to that long
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
