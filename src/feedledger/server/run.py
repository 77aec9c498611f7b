"""Starting the server: uvicorn on a socket bound here (so `--port 0` works and the
address is printed before the first request), or, with `--workers N`, uvicorn's
supervisor over N processes each building the app from the environment
(`app.app_from_env`), each worker listening on a socket of its own bound to the same
address with SO_REUSEPORT (`_OwnSocketProcess`) where the system has it. SIGTERM or
Ctrl-C: uvicorn finishes the requests under way, the lifespan closes the ledger, and
the process exits 0."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import uvicorn
from uvicorn.supervisors import Multiprocess, multiprocess
from uvicorn.supervisors.multiprocess import Process as _Worker

import feedledger as fl
from feedledger.api.ledger import open_config
from feedledger.server.app import (
    CONFIG_ENV,
    GO_FILE,
    READY_ENV,
    TOKEN_ENV_ENV,
    create_app,
    tokens_from_env,
)

GRACE_S = 10  # how long requests under way may take to finish after SIGTERM
# how long uvicorn's supervisor waits for a worker to answer its health check before it
# kills and restarts it (uvicorn's default, 5 s, is shorter than a worker's start-up on
# a large workspace under load: seen as workers restarted in a loop, never serving)
WORKER_HEALTHCHECK_S = 60


def _ignore(signum: int, frame: object) -> None:
    """uvicorn re-raises the signal it shut down on once it has finished: by then the
    shutdown was graceful, and the process ends with 0, not killed by the signal."""


def serve(
    *,
    config: str | None,
    host: str,
    port: int,
    token_env: str | None,
    workers: int = 1,
    root_path: str = "",
    forwarded_allow_ips: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run until SIGTERM/SIGINT. `announce` hears the URL once the socket is bound."""
    # the CLI turns the cyclic collector off for its short-lived commands (cli/process.py);
    # a server lives long: without it, every reference cycle a request leaves would stay
    gc.enable()

    tokens = tokens_from_env(token_env)
    mode = f"writes with the tokens in ${token_env}" if tokens else "read-only"
    say = announce or (lambda text: print(text, flush=True))
    common = {
        "root_path": root_path,
        "proxy_headers": forwarded_allow_ips is not None,
        "forwarded_allow_ips": forwarded_allow_ips,
        "timeout_graceful_shutdown": GRACE_S,
        "log_level": "info",
        "access_log": False,
    }
    signal.signal(signal.SIGTERM, _ignore)
    signal.signal(signal.SIGINT, _ignore)
    if workers > 1:
        os.environ[CONFIG_ENV] = config or ""
        os.environ[TOKEN_ENV_ENV] = token_env or ""
        shared = not hasattr(socket, "SO_REUSEPORT")
        sock = _bind(host, port, reuse_port=not shared)
        # (the supervisor makes its workers, first and restarted ones, of this name)
        multiprocess.Process = _Worker if shared else _OwnSocketProcess  # type: ignore[misc]
        ready = tempfile.mkdtemp(prefix="feedledger-serve-")
        os.environ[READY_ENV] = ready
        bound = sock.getsockname()[1]
        settings = uvicorn.Config(
            "feedledger.server.app:app_from_env",
            factory=True,
            host=host,
            port=bound,
            workers=workers,
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
            **common,  # type: ignore[arg-type]
        )
        text = f"feedledger serve: http://{_show(host)}:{bound}/ ({workers} workers, {mode})"

        def started() -> bool:  # every worker has started up and waits for GO_FILE
            return len([n for n in os.listdir(ready) if n != GO_FILE]) >= workers

        def go() -> None:  # the URL first: no worker answers before it is printed
            say(text)
            open(os.path.join(ready, GO_FILE), "w").close()

        _once(started, go)
        try:
            Multiprocess(settings, sockets=[sock]).run()
        finally:
            shutil.rmtree(ready, ignore_errors=True)
        return
    with open_config(config) as probe:  # refuse a bad workspace before binding
        probe.sources()
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    text = f"feedledger serve: http://{_show(host)}:{bound}/ ({mode})"
    app = create_app(lambda: open_config(config), tokens, warm=True, started=lambda: say(text))
    settings = uvicorn.Config(app, host=host, port=bound, **common)  # type: ignore[arg-type]
    # listening from now on: a connection made during start-up waits in the backlog (it
    # is never refused), and is answered once the start-up is done and the URL printed
    sock.listen(settings.backlog)
    uvicorn.Server(settings).run(sockets=[sock])
    sys.stdout.flush()


def _show(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _once(ready: Callable[[], bool], then: Callable[[], None]) -> None:
    """`then()` in a thread of its own as soon as `ready()` (polled every 20 ms).

    `--workers N`: the URL is printed once every worker has started up (the ledger
    opened), and only then do they answer; printed before, a client that took it at its
    word had its first connections refused for ~1.5 s, and all of them went to the first
    worker up, for as long as they were kept alive."""

    def wait() -> None:
        while not ready():
            time.sleep(0.02)
        then()

    threading.Thread(target=wait, name="feedledger-ready", daemon=True).start()


class _OwnSocketProcess(_Worker):
    """A uvicorn worker that listens on a socket of its own, bound with SO_REUSEPORT to
    the address of the supervisor's socket (which reserves the address and is never
    listened on), so that the kernel spreads new connections over the workers.

    On one shared listening socket, whichever worker woke first accepted everything
    queued: the 20 keep-alive connections of bench/http_bench.py's clients all landed
    on one worker in about one run in four, which then served ~1,000 requests/s while
    the other idled (2,000-2,300 when both had some), and p50 doubled (uvicorn issue
    2467; gunicorn's `--reuse-port` and nginx's `reuseport` do the same as this).

    The socket listens from the worker's first moment, before its start-up: the kernel
    spreads connections over every worker from the start and queues those of a worker
    still starting, which answers them once `serve` has printed the URL (the app's
    lifespan waits for it: `app._started_then_wait`)."""

    def target(self, sockets: list[socket.socket] | None = None) -> None:
        own = []
        for shared in sockets or []:
            family = shared.family
            host, port = shared.getsockname()[:2]
            sock = _bind(host, port, reuse_port=True, family=family)
            sock.listen(self.config.backlog)
            own.append(sock)
            shared.close()
        super().target(own)


def _bind(
    host: str, port: int, *, reuse_port: bool = False, family: int | None = None
) -> socket.socket:
    if family is None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
    # (proto 0 left Nagle on: each answer, written as head then body, waited ~40 ms for
    # the client's delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted ones
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise fl.ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    except OverflowError:  # (Python's own check of the port number)
        sock.close()
        raise fl.ConfigError(f"cannot listen on {host}:{port}: a port is 0-65535") from None
    sock.set_inheritable(True)
    return sock
