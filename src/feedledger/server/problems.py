"""Errors as RFC 9457 problem details (`application/problem+json`: type, title,
status, detail, instance): feedledger's error classes mapped to HTTP statuses, FastAPI's
own validation errors and HTTP errors included. A detail never shows a secret (the
configured tokens, a store URL's password) nor a filesystem path outside the workspace
(paths inside it are shown relative to it)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

import feedledger as fl

log = logging.getLogger("feedledger.server")

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "urn:feedledger:problem:"

# (error class, HTTP status, problem type), most specific first
_STATUS: list[tuple[type[fl.FeedledgerError], int, str]] = [
    (fl.NotFoundError, 404, "not-found"),
    (fl.InGap, 409, "in-gap"),
    (fl.NotObserved, 409, "not-observed"),
    (fl.ConfigError, 422, "invalid-request"),
    (fl.BadPayloadError, 422, "bad-payload"),
    (fl.SourceFrozenError, 409, "source-frozen"),
    (fl.RetractConflictError, 409, "retract-conflict"),
    (fl.LeaseHeldError, 409, "lease-held"),
    (fl.StaleWatermarkError, 409, "stale-watermark"),
    (fl.MassDeleteError, 409, "mass-delete"),
    (fl.StoreUnavailableError, 503, "store-unavailable"),
    (fl.ArchiveUnavailableError, 503, "archive-unavailable"),
]

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    422: "Unprocessable request",
    500: "Internal server error",
    503: "Service unavailable",
}

_PATH = re.compile(r"(?<![\w:/.])/(?:[^\s'\"`,;()\[\]{}<>]+)")
_URL_PASSWORD = re.compile(r"(\w[\w+.-]*://[^/\s:@]*):[^@\s/]*@")


def hide_password(text: str) -> str:
    """A URL's password as ***."""
    return _URL_PASSWORD.sub(r"\1:***@", text)


class Problem(Exception):
    """An HTTP problem raised by a route (auth, read-only, a bad parameter)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind
        self.headers = headers or {}


class Scrubber:
    """Takes secrets and outside paths out of a text shown to a client."""

    def __init__(self, root: Path | None, secrets: Iterable[str] = ()) -> None:
        self.root = root.resolve() if root is not None else None
        self.secrets = sorted((s for s in secrets if s), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        text = _URL_PASSWORD.sub(r"\1:***@", text)
        return _PATH.sub(self._path, text)

    def _path(self, match: re.Match[str]) -> str:
        raw = match.group(0)
        if self.root is not None:
            try:
                inside = Path(raw).resolve().relative_to(self.root)
            except (ValueError, OSError):
                return "<path>"
            return str(inside) if str(inside) != "." else "."
        return "<path>"


def body(status: int, detail: str, instance: str, kind: str | None = None) -> dict[str, Any]:
    title = _TITLES.get(status, "Error")
    slug = kind or title.lower().replace(" ", "-")
    return {
        "type": TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
    }


def response(
    status: int,
    detail: str,
    instance: str,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        body(status, detail, instance, kind),
        status_code=status,
        media_type=MEDIA_TYPE,
        headers=headers,
    )


def _scrub(request: Request, text: str) -> str:
    scrub: Scrubber | None = getattr(request.app.state, "scrub", None)
    return scrub(text) if scrub is not None else text


def _instance(request: Request) -> str:
    path = request.url.path
    return path + ("?" + request.url.query if request.url.query else "")


def feedledger_problem(exc: fl.FeedledgerError) -> tuple[int, str]:
    for cls, status, kind in _STATUS:
        if isinstance(exc, cls):
            return status, kind
    return 400, "feedledger-error"


def install(app: FastAPI) -> None:
    """The exception handlers of the app: every error answers problem+json."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return response(
            exc.status, _scrub(request, exc.detail), _instance(request), exc.kind, exc.headers
        )

    @app.exception_handler(fl.FeedledgerError)
    async def _feedledger(request: Request, exc: fl.FeedledgerError) -> JSONResponse:
        status, kind = feedledger_problem(exc)
        return response(status, _scrub(request, str(exc)), _instance(request), kind)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(x) for x in err.get("loc", ()))
            parts.append(f"{where}: {err.get('msg', 'invalid')}")
        detail = "; ".join(parts) or "invalid request"
        return response(422, _scrub(request, detail), _instance(request), "invalid-request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        # a page URL naming no page: the dashboard's not-found page (pages.not_found,
        # set by app.py when the dashboard is there), not a problem
        page = getattr(request.app.state, "not_found_page", None)
        if exc.status_code == 404 and page is not None:
            found: Response | None = page(request)
            if found is not None:
                return found
        detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "")
        return response(
            exc.status_code,
            _scrub(request, detail),
            _instance(request),
            headers=dict(exc.headers or {}),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # (a database's error reaches here as a FeedledgerError: ledger/failures.py)
        log.exception("unexpected error serving %s", request.url.path)
        return response(
            500, "an unexpected error; see the server's log", _instance(request), "internal"
        )
