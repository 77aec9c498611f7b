"""`feedledger serve` as a real process: it binds a free 127.0.0.1 port
(`--port 0`, the URL printed), answers /api/health, streams a snapshot, takes a write
with the token of `--token-env`, and exits 0 on SIGTERM after closing the ledger."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

import feedledger as fl
from feedledger.config import Workspace
from helpers import migrate, start_serve


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    migrate(ws.store_url)
    with fl.open(ws.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        body = "id,v\n" + "".join(f"{i},v{i}\n" for i in range(5000))
        src.ingest(body.encode(), published_at="2026-08-01", name="s.csv")
    return ws


def _wait(url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url + "/api/health", timeout=5)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_serve_answers_then_exits_0_on_sigterm(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    proc, url = start_serve(
        ws, "--token-env", "FL_TEST_TOKENS", env={"FL_TEST_TOKENS": "ops:t0ken"}
    )
    try:
        health = _wait(url)
        assert health.status_code == 200 and health.json()["sources"][0]["source"] == "s"
        with httpx.stream("GET", url + "/api/sources/s/snapshot?valid=2026-08-02&format=jsonl",
                          timeout=30) as r:  # fmt: skip
            assert r.status_code == 200
            rows = sum(chunk.count(b"\n") for chunk in r.iter_bytes())
        assert rows == 5000
        refused = httpx.post(url + "/api/sources/s/freeze", timeout=5)
        assert refused.status_code == 401
        done = httpx.post(url + "/api/sources/s/freeze", headers={"Authorization": "Bearer t0ken"},
                          timeout=10)  # fmt: skip
        assert done.status_code == 200 and done.json()["audit"]["actor"] == "ops"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "t0ken" not in out + err


def test_serve_is_read_only_without_the_variable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "FL_TEST_UNSET"}
    proc, url = start_serve(ws, "--token-env", "FL_TEST_UNSET", env=env)
    try:
        _wait(url)
        r = httpx.post(url + "/api/sources/s/freeze", headers={"Authorization": "Bearer x"})
        assert r.status_code == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_sigterm_lets_the_response_under_way_finish(tmp_path: Path) -> None:
    """Graceful shutdown: SIGTERM while a snapshot streams; the stream still ends with
    every row, then the process exits 0 (no new request is taken meanwhile)."""
    ws = _workspace(tmp_path)
    proc, url = start_serve(ws, env={})
    try:
        _wait(url)
        with httpx.stream("GET", url + "/api/sources/s/snapshot?valid=2026-08-02&format=jsonl",
                          timeout=30) as r:  # fmt: skip
            assert r.status_code == 200
            chunks = r.iter_bytes()
            rows = next(chunks).count(b"\n")
            proc.send_signal(signal.SIGTERM)
            rows += sum(chunk.count(b"\n") for chunk in chunks)
        assert rows == 5000
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Finished server process" in err or "Shutting down" in err, err


def test_the_demo_ends_with_the_serve_command_and_the_timeline_url(tmp_path: Path) -> None:
    """`make demo` (`feedledger demo`) ends by printing the `serve` command and the URL
    of the demo parcel's timeline; both work as printed (on a free port here)."""
    import shlex
    from urllib.parse import urlsplit

    demo = subprocess.run(
        [sys.executable, "-m", "feedledger", "demo", "--dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    command, opens = [line.strip() for line in demo.stdout.strip().splitlines()[-2:]]
    assert command.endswith(" serve") and opens.startswith("then open http://127.0.0.1:8765/")
    link = urlsplit(opens.removeprefix("then open "))
    assert link.path == "/sources/larimer/entities/0714-22-1"
    args = shlex.split(command)[1:]  # the printed executable is this venv's feedledger
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert found, proc.stderr
        url = f"http://127.0.0.1:{found.group(1)}"
        _wait(url)
        page = httpx.get(url + link.path, timeout=10)
        assert page.status_code == 200 and 'data-page="entity"' in page.text
        history = httpx.get(url + "/api" + link.path + "/history", timeout=10).json()
        assert len(history) > 1 and history[0]["key"] == ["0714-22-1"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_workers_share_the_workspace_and_the_tokens_and_stop_on_sigterm(tmp_path: Path) -> None:
    """`--workers 2`: uvicorn's supervisor over two processes, each building the app
    from the environment (workspace, token variable); SIGTERM stops them all, exit 0."""
    ws = _workspace(tmp_path)
    proc, url = start_serve(ws, "--workers", "2", "--token-env", "FL_TEST_TOKENS",
                       env={"FL_TEST_TOKENS": "ops:t0ken"})  # fmt: skip
    try:
        assert _wait(url).json()["sources"][0]["source"] == "s"
        for _ in range(4):  # whichever worker answers
            assert httpx.get(url + "/api/sources/s", timeout=10).json()["name"] == "s"
        refused = httpx.post(url + "/api/sources/s/freeze", timeout=10)
        assert refused.status_code == 401
        done = httpx.post(url + "/api/sources/s/freeze", headers={"Authorization": "Bearer t0ken"},
                          timeout=10)  # fmt: skip
        assert done.status_code == 200 and done.json()["audit"]["actor"] == "ops"
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "t0ken" not in err


def test_a_port_out_of_range_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`--port 99999` or `--port -1`: one line naming the address, not Python's
    OverflowError traceback; and `:-1:` is printed as typed, not as Rich's emoji."""
    ws = _workspace(tmp_path)
    for port, address in (("99999", "127.0.0.1:99999"), ("-1", "127.0.0.1:-1")):
        done = subprocess.run(
            [sys.executable, "-m", "feedledger", "--config", str(ws.config_path), "serve",
             "--port", port],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"error: cannot listen on {address}: a port is 0-65535"


def test_each_worker_listens_on_its_own_socket_and_connections_spread(tmp_path: Path) -> None:
    """`--workers 2`: each worker listens on a socket of its own (SO_REUSEPORT) and the
    supervisor on none, so the kernel spreads connections over the workers; the URL is
    printed once both listen (server/run.py `_once`). On one shared
    socket, 20 keep-alive connections all went to one worker in about a run in four
    (server/run.py). 16 connections all on one worker by chance: p = 2**-15."""
    import socket

    import psutil

    ws = _workspace(tmp_path)
    proc, url = start_serve(ws, "--workers", "2", env={})
    held: list[socket.socket] = []
    try:
        # the URL is printed once every worker listens (no retry, no wait here)
        port = int(url.rsplit(":", 1)[1])
        workers = [  # (multiprocessing's resource tracker is a child too)
            w for w in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(w.cmdline())
        ]
        listening = {
            w.pid: [c for c in w.net_connections("tcp") if c.status == psutil.CONN_LISTEN
                    and c.laddr.port == port]
            for w in workers
        }  # fmt: skip
        assert len(workers) == 2 and all(len(c) == 1 for c in listening.values()), listening
        mine = [c for c in psutil.Process(proc.pid).net_connections("tcp") if c.laddr.port == port]
        assert not [c for c in mine if c.status == psutil.CONN_LISTEN]
        for _ in range(16):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        deadline = time.monotonic() + 30
        while True:  # accepted by the workers' loops
            served = {
                w.pid: sum(c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port
                           for c in w.net_connections("tcp"))
                for w in workers
            }  # fmt: skip
            if sum(served.values()) == 16 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sum(served.values()) == 16 and all(served.values()), served
    finally:
        for s in held:
            s.close()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_behind_a_reverse_proxy_under_a_path_prefix(tmp_path: Path) -> None:
    """README's proxy set-up: the proxy strips `/fl/` and the server runs with
    `--root-path /fl`: requests come without the prefix, every link, asset and the
    OpenAPI document's URL of the pages carry it."""
    ws = _workspace(tmp_path)
    proc, url = start_serve(ws, "--root-path", "/fl", env={})
    try:
        assert _wait(url).status_code == 200
        for path in ("/sources/s", "/docs"):
            text = httpx.get(url + path, timeout=10).text
            found = re.findall(r'(?:src|href|url)[=:] ?["\']([^"\']+)', text)
            links = [link for link in found if not link.startswith("#")]  # #main: in-page
            assert links and all(link.startswith("/fl/") for link in links), (path, links)
            for link in links:  # as the proxy forwards them: the prefix stripped
                got = httpx.get(url + link.removeprefix("/fl"), timeout=10)
                assert got.status_code == 200, link
        assert httpx.get(url + "/openapi.json", timeout=10).json()["servers"] == [{"url": "/fl"}]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
