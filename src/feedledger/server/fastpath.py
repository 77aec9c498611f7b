"""The entity routes' fast path: an ASGI middleware answering the plain cases of
`GET /api/sources/{source}/entities/{key}/asof?valid=&known_at=` and `.../history?known_at=`
itself, before FastAPI's routing, dependency solving and parameter validation (about
half the CPU of such a request once the read itself is one indexed lookup: the routes
are the HTTP API's hot path, `bench/http_bench.py`).

The answer is the route's own (`routes/sources.asof_body` / `history_body`, the same
`JSONText` bytes and headers), so nothing about it can differ. Anything else goes to
the app untouched: another method or path, an unknown, repeated or boolean parameter
(`all`, `with_gaps`), a missing `valid`, and ANY error while answering -- the app then
answers the request again from the start, with its problem-details errors (a GET of
an entity reads only; nothing was sent yet).
"""

from __future__ import annotations

from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from feedledger.server.deps import JSONText, in_reader
from feedledger.server.routes.sources import asof_body, history_body

PREFIX = "/api/sources/"
ASOF = frozenset({"valid", "known_at"})
HISTORY = frozenset({"known_at"})


class EntityFastPath:
    """ASGI middleware (`app.add_middleware(EntityFastPath)`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and _entity(scope):
            # SQLite: answered on the event loop (the read is in-process CPU, ~0.1 ms);
            # PostgreSQL: in the threadpool, so that requests wait for the server's round
            # trip side by side (each thread has its own reading connection: deps.in_reader)
            if _remote_store(scope):
                response = await in_reader(partial(answer, scope))
            else:
                response = answer(scope)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _entity(scope: Scope) -> bool:
    path: str = scope["path"]
    return PREFIX in path and path.endswith(("/asof", "/history"))


def _remote_store(scope: Scope) -> bool:
    """The app's store is PostgreSQL (its workspace's store URL), cached on the app."""
    state = getattr(scope.get("app"), "state", None)
    if state is None:
        return False
    found: bool | None = getattr(state, "fastpath_remote", None)
    if found is None:
        led = getattr(state, "ledger", None)
        if led is None:
            return False
        found = state.fastpath_remote = led.workspace.store_url.startswith("postgres")
    return found


def route_path(scope: Scope) -> str:
    """The path under the app's root path (as Starlette's router matches it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root + "/"):
        return path[len(root) :]
    return path


def answer(scope: Scope) -> JSONText | None:
    """The route's answer to a plain entity request; None: leave it to the app."""
    path = route_path(scope)
    if not path.startswith(PREFIX):
        return None
    parts = path.split("/")  # "", api, sources, SOURCE, entities, KEY, asof|history
    if len(parts) != 7 or parts[4] != "entities" or not parts[3] or not parts[5]:
        return None
    kind = parts[6]
    if kind not in ("asof", "history"):
        return None
    app: Any = scope.get("app")
    led = getattr(getattr(app, "state", None), "ledger", None)
    if led is None:
        return None
    query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    params = dict(query)
    if len(params) != len(query) or not params.keys() <= (ASOF if kind == "asof" else HISTORY):
        return None
    try:
        if kind == "asof":
            if not params.get("valid"):
                return None
            body: Any = asof_body(led, parts[3], parts[5], params["valid"], params.get("known_at"))
        else:
            body = history_body(led, parts[3], parts[5], params.get("known_at"), False, False)
    except Exception:  # the app answers it again, with its own error
        return None
    return JSONText(body)
