"""What the dashboard's browser tests share: Debian's Chromium (never a browser
Playwright downloads), `feedledger serve` started as a subprocess on a free 127.0.0.1
port (it binds port 0 itself and prints the address), a webhook receiver, and the
artefacts folder for screenshots."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM_INSTALL = "apt-get install -y --no-install-recommends chromium"
SKIP_NO_CHROMIUM = f"Chromium not found (/usr/bin/chromium): {CHROMIUM_INSTALL}"
ARTEFACTS = Path(__file__).parent / "artefacts"
FEEDLEDGER = Path(sys.executable).with_name("feedledger")


def chromium() -> str | None:
    """The Chromium binary: $FEEDLEDGER_CHROMIUM, Debian's /usr/bin/chromium, or one on
    PATH; None when there is none."""
    for candidate in (os.environ.get("FEEDLEDGER_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT (no trailing slash)
    proc: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)


@contextmanager
def serve(config: Path, token_env: str | None, env: dict[str, str]) -> Iterator[Served]:
    """`feedledger serve --port 0` over the workspace `config`; stopped with SIGTERM."""
    args = [str(FEEDLEDGER), "--config", str(config), "serve", "--port", "0"]
    if token_env:
        args += ["--token-env", token_env]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    url = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        proc.kill()
        raise AssertionError("feedledger serve did not start:\n" + "".join(lines))
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    drain.start()
    _wait_ready(url, proc, lines, deadline)
    try:
        yield Served(url, proc, lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[str], lines: list[str], deadline: float) -> None:
    """Until the server answers (the address is printed once the socket is bound, a
    moment before uvicorn listens on it)."""
    import httpx

    while True:
        try:
            httpx.get(url + "/api/dashboard", timeout=5)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("serve is not answering:\n" + "".join(lines)) from None
            time.sleep(0.05)


@dataclass
class Receiver:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def mentioning(self, run_id: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if run_id in json.dumps(b)]


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    """A webhook endpoint on 127.0.0.1 (port 0) answering 200 and keeping each JSON body."""
    receiver = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a connection per dispatcher worker

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size)
            try:
                receiver.bodies.append(json.loads(raw))
            except ValueError:
                receiver.bodies.append({"raw": raw.decode("utf-8", "replace")})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        # the dispatcher opens up to 16 connections at once (Policy.concurrency): with
        # socketserver's listen backlog of 5 the kernel dropped some (ListenOverflows),
        # and under load a message now and then failed with "connection reset"
        request_queue_size = 128
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    try:
        yield receiver
    finally:
        httpd.shutdown()
        httpd.server_close()


def cli(config: Path, *args: str) -> str:
    """`feedledger --config CONFIG ARGS` (exit 0), its stdout."""
    out = subprocess.run(
        [str(FEEDLEDGER), "--config", str(config), *args], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def cli_json(config: Path, *args: str) -> Any:
    """`feedledger --config CONFIG ARGS --json`, parsed (exit 1 is `health`'s "a source
    is stale", its JSON printed all the same)."""
    out = subprocess.run(
        [str(FEEDLEDGER), "--config", str(config), *args, "--json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)
