"""Webhook receivers on 127.0.0.1 (what they answer, what they heard) and the dispatch and
message-file helpers shared by the notify tests.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import Cli
from pipeline.backfill_scenario import (
    LIVE,
    declare,
    ingest_args,
)


@dataclass(frozen=True)
class Reply:
    status: int = 204
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds to sleep before answering


@dataclass(frozen=True)
class Hit:
    headers: dict[str, str]  # lower-cased names
    body: bytes
    answered: int

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """ThreadingHTTPServer on 127.0.0.1 recording every POST. The n-th request carrying
    a given `webhook-id` gets script[n] (the last reply repeats)."""

    def __init__(self, *script: Reply, port: int = 0) -> None:
        self.script = list(script) or [Reply()]
        self.hits: list[Hit] = []
        self.port = port
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    mid = headers.get("webhook-id", "")
                    n = receiver._seen[mid]
                    receiver._seen[mid] += 1
                    reply = receiver.script[min(n, len(receiver.script) - 1)]
                    receiver.hits.append(Hit(headers, body, reply.status))
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:  # the client gave up (timeout)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        server = self._server
        threading.Thread(target=lambda: server.serve_forever(0.05), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def ids(self) -> list[str]:
        with self._lock:
            return [h.id for h in self.hits]

    def bodies(self) -> list[Any]:
        with self._lock:
            return [h.json for h in self.hits]


def serve(started: list[Receiver], *script: Reply, port: int = 0) -> Receiver:
    r = Receiver(*script, port=port)
    started.append(r)
    return r


def dispatch(cli: Cli, *extra: str, backoff: str = "0") -> dict[str, Any]:
    result: dict[str, Any] = cli.json("notify", "dispatch", "--once", "--backoff", backoff, *extra)
    return result


def file_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def live_payload(cli: Cli, tmp_path: Path, day: str = LIVE[0]) -> dict[str, Any]:
    """The seed's source with the 08-02 payload applied live (two `added` changes)."""
    declare(cli)
    result: dict[str, Any] = cli.json(*ingest_args(tmp_path, day, LIVE[1]))
    assert result["changes"] == 2
    return result
