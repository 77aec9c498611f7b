"""The FastAPI application: the JSON API under /api (OpenAPI at /docs and
/openapi.json), problem-details errors, and the dashboard's pages when
`feedledger.server.pages` is present (its `router`).

One ledger per process, opened by `create_app` (or by the factory `app_from_env`, which
uvicorn's workers call): the API's objects are shared by the threadpool that runs the
sync endpoints (SQLAlchemy's engine and its pool are thread-safe)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

import feedledger as fl
from feedledger.api.ledger import open_config
from feedledger.api.snapshot_stream import warm_up
from feedledger.server import docs, ogc, problems
from feedledger.server.auth import Token, parse_tokens
from feedledger.server.fastpath import EntityFastPath
from feedledger.server.routes import destinations, runs, sources, streaming, writes

# what `feedledger serve` hands to the worker processes (uvicorn's factory takes no
# arguments): the workspace's feedledger.toml and the name of the token variable
CONFIG_ENV = "FEEDLEDGER_SERVE_CONFIG"
TOKEN_ENV_ENV = "FEEDLEDGER_SERVE_TOKEN_ENV"
# `--workers N`: the folder in which each worker marks itself started (a file named by
# its pid) and then waits, before it listens, for `GO_FILE`, which `serve` writes once
# it has printed the URL (server/run.py): so the URL is out before any worker answers
READY_ENV = "FEEDLEDGER_SERVE_READY_DIR"
GO_FILE = "go"

Opener = Callable[[], fl.Ledger]
log = logging.getLogger("feedledger.server")
# how often a warm server looks for a GIS source's new state (a payload applied by
# another process, a retraction, a replay) to build its layer's index before a request
# needs it: one watermark read per GIS source a look
LAYER_FOLLOW_S = 5.0


def create_app(
    open_ledger: Opener,
    tokens: list[Token] | None = None,
    *,
    warm: bool = False,
    started: Callable[[], None] | None = None,
) -> FastAPI:
    """The app over the ledger `open_ledger()` opens (at startup; closed at shutdown).
    `tokens`: who may write (none: read-only). `warm`: at startup, pay what a snapshot
    stream's first use costs (`api.snapshot_stream.warm_up`), as `feedledger serve`
    does, and once started build the GIS layers' spatial indexes on a thread of their
    own (`_follow_layers`: the OGC API's first page of each), and again for each new
    state of a layer, every LAYER_FOLLOW_S, until shutdown."""
    tokens = list(tokens or [])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        led = app.state.ledger if getattr(app.state, "ledger", None) else open_ledger()
        app.state.ledger = led
        # open the store now, once, before the threadpool's threads ask for it
        _ = led.context.store
        app.state.scrub = problems.Scrubber(led.workspace.root, [t.secret for t in tokens])
        if warm:
            await asyncio.to_thread(warm_up)
        # what start-up made (modules, the app, the ledger) lives as long as the process:
        # kept out of the cyclic collector's full passes, which otherwise walked it all
        # every time, a pause of its own in the requests under way
        gc.collect()
        gc.freeze()
        await asyncio.to_thread(_started_then_wait)
        if started is not None:  # (`serve` prints its URL: before any answer)
            started()
        stop = threading.Event()
        follower = None
        if warm:  # the GIS layers' spatial indexes, built beside the first requests
            follower = threading.Thread(
                target=_follow_layers, args=(led, stop), name="feedledger-layers", daemon=True
            )
            follower.start()
        try:
            yield
        finally:
            stop.set()
            if follower is not None:  # a look under way ends first (a build: 2 s at most,
                follower.join(timeout=2.0)  # then the ledger closes under it: logged once)
            led.close()
            app.state.ledger = None

    app = FastAPI(
        title="feedledger",
        version=fl.__version__,
        summary="An honest, replayable, bitemporal history of external data feeds.",
        lifespan=lifespan,
        # /docs loads its assets from this process, not a CDN (server/docs.py); no ReDoc
        docs_url=None,
        redoc_url=None,
    )
    app.state.tokens = tokens
    app.state.ledger = None
    app.state.scrub = problems.Scrubber(None, [t.secret for t in tokens])
    app.state.not_found_page = None
    problems.install(app)
    for module in (sources, streaming, runs, destinations, writes):
        app.include_router(module.router)
    app.include_router(ogc.router)  # OGC API - Features (server/ogc.py)
    app.include_router(docs.router)
    _mount_pages(app)
    # the plain asof/history requests answered before routing (server/fastpath.py)
    app.add_middleware(EntityFastPath)
    return app


def _follow_layers(led: fl.Ledger, stop: threading.Event) -> None:
    """Keep each GIS source's current spatial index built (`Source.layer()`): at start,
    then whenever its state moves on (the index is per state: a look at a state already
    built costs a watermark read), so that a GIS client's request does not wait for it
    (seconds of CPU at 1M parcels). Best effort: a failure is logged (once per state),
    and the request that needs the index builds it instead."""
    failed: set[tuple[str, str]] = set()
    while True:
        _warm_layers(led, failed, stop)
        if stop.wait(LAYER_FOLLOW_S):
            return


def _warm_layers(led: fl.Ledger, failed: set[tuple[str, str]], stop: threading.Event) -> None:
    for config in led.sources(by_name=False):
        if stop.is_set():
            return
        if not config.is_geo:
            continue
        try:
            led.source(config.name).layer().extent()
        except Exception as exc:  # the server goes on; the request that needs it tries again
            seen = (config.name, str(exc))
            if seen not in failed:
                failed.add(seen)
                log.warning("warming the layer of %s failed", config.name, exc_info=True)


def _started_then_wait() -> None:
    """A worker of `serve --workers N` (READY_ENV set): mark this one started, then wait
    until `serve` has printed the URL (GO_FILE; at once for a worker restarted later, or
    if the folder is gone: `serve` is ending)."""
    folder = os.environ.get(READY_ENV)
    if not folder:
        return
    with contextlib.suppress(OSError):
        open(os.path.join(folder, str(os.getpid())), "w").close()
    go = os.path.join(folder, GO_FILE)
    while os.path.isdir(folder) and not os.path.exists(go):
        time.sleep(0.02)


def _mount_pages(app: FastAPI) -> None:
    """The dashboard (server/pages.py: `router`, and its static files) if it is there."""
    try:
        pages = importlib.import_module("feedledger.server.pages")
    except ModuleNotFoundError as exc:
        if exc.name != "feedledger.server.pages":
            raise
        return
    app.include_router(pages.router)
    app.state.not_found_page = pages.not_found


def tokens_from_env(var: str | None) -> list[Token]:
    """The tokens in the variable `var` (none if not named, unset or empty)."""
    return parse_tokens(os.environ.get(var)) if var else []


def app_from_env() -> FastAPI:
    """The factory uvicorn's worker processes call (`--workers N`): the workspace and the
    token variable as `feedledger serve` put them in the environment."""
    config = os.environ.get(CONFIG_ENV) or None
    tokens = tokens_from_env(os.environ.get(TOKEN_ENV_ENV))
    # not warmed: what a snapshot stream's first use costs (~140 MiB and ~2 s a process,
    # `api.snapshot_stream.warm_up`) is paid by each worker's first stream, not by every
    # worker before its first request (most requests never stream)
    return create_app(lambda: open_config(config), tokens, warm=False)
