"""`feedledger serve` (one process or `--workers 2`): the URL is printed before any
request is answered (each process listens at once, starts up, and answers only once
the URL is out: connections made meanwhile wait), and with `--workers` a worker
does not load what only a snapshot stream needs (numba's compiled loops, the writers'
warm-up) before its first request. Asserted by the order of events and by what the
workers have mapped, not by timing."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from feedledger.config import Workspace
from helpers import migrate


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _printed_so_far(fd: int) -> bytes:
    """What the server has written to its stdout pipe by now (without waiting)."""
    out = b""
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.parametrize("workers", [2, 1])
def test_the_url_is_out_before_any_worker_answers(tmp_path: Path, workers: int) -> None:
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    migrate(ws.store_url)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(ws.config_path), "serve",
         "--workers", str(workers), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    printed = b""
    try:
        deadline = time.monotonic() + 120  # a hang detector only
        while True:
            printed += _printed_so_far(fd)
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=30)
                break
            except httpx.TransportError:
                assert proc.poll() is None, "serve ended"
                assert time.monotonic() < deadline, "no worker answered"
                time.sleep(0.02)
        # the first answer: the URL must have been written before it
        printed += _printed_so_far(fd)
        assert answer.status_code == 200
        assert f"http://127.0.0.1:{port}/ (".encode() in printed, printed
        if workers == 1:
            return
        children = [
            p for p in psutil.Process(proc.pid).children() if p.memory_info().rss > 30 * 2**20
        ]
        assert len(children) == 2, children
        for worker in children:
            maps = Path(f"/proc/{worker.pid}/maps").read_text()
            assert "/numba/" not in maps, "a worker loaded numba before its first stream"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
