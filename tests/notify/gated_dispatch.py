"""A receiver whose answers wait on a gate, and dispatcher processes started side by side:
shared by the claims and secrets tests.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from helpers import Cli


class Gated:
    """A receiver on 127.0.0.1 whose answers wait until `gate(self)` is true (polled),
    at most `hold_s`; it records (webhook-id, client port) per request."""

    def __init__(self, gate: Callable[[Gated], bool] = lambda _r: True, hold_s: float = 60):
        self.gate, self.hold_s = gate, hold_s
        self.hits: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection per client

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.hits.append((self.headers["webhook-id"], self.client_address[1]))
                deadline = time.monotonic() + receiver.hold_s
                while not receiver.gate(receiver) and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=lambda: self.server.serve_forever(0.05), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def ids(self) -> list[str]:
        with self.lock:
            return [i for i, _port in self.hits]

    def ports(self) -> set[int]:
        with self.lock:
            return {port for _i, port in self.hits}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def receiver(
    started: list[Gated], gate: Callable[[Gated], bool] = lambda _r: True, hold_s: float = 60
) -> Gated:
    r = Gated(gate, hold_s)
    started.append(r)
    return r


def spawn(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(cli.ws.config_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)
