"""The OpenAPI page, `/docs` (Swagger UI), working with no internet: its script and
stylesheet are the ones the `fastapi-offline` package ships (a dependency), served from
this process under `/docs/assets/<its version>/`, never from a CDN. FastAPI's own pages
(which load them from a CDN) are turned off in app.py; so is ReDoc, whose page loads
its logo from its maker's CDN whatever its options."""

from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from feedledger.server.assets import IMMUTABLE, version
from feedledger.server.problems import Problem

DOCS = "/docs"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
ASSETS = "/docs/assets"
# the files the pages load, by name: (media type)
FILES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}
# Swagger UI asks no outside validator for a badge
PARAMETERS = {"validatorUrl": None}

router = APIRouter(include_in_schema=False)


@cache
def _folder() -> Path:
    return Path(fastapi_offline.__file__).parent / "static"


@cache
def stamp() -> str:
    """The assets' version: the package's (a new one gets new URLs)."""
    return metadata.version("fastapi-offline")


def _root(request: Request) -> str:
    return str(request.scope.get("root_path") or "").rstrip("/")


def _asset(request: Request, name: str) -> str:
    return f"{_root(request)}{ASSETS}/{stamp()}/{name}"


def _favicon(request: Request) -> str:
    return f"{_root(request)}/static/{version()}/favicon.svg"


@router.get(DOCS)
def swagger_ui(request: Request) -> HTMLResponse:
    app: FastAPI = request.app
    root = _root(request)
    return get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - API",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT}",
        swagger_js_url=_asset(request, "swagger-ui-bundle.js"),
        swagger_css_url=_asset(request, "swagger-ui.css"),
        swagger_favicon_url=_favicon(request),
        swagger_ui_parameters=PARAMETERS,
    )


@router.get(OAUTH2_REDIRECT)
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.api_route(ASSETS + "/{stamped}/{name}", methods=["GET", "HEAD"])
def asset(stamped: str, name: str) -> Response:
    """One of the pages' files: cached a year under the current stamp."""
    path = _folder() / name
    if name not in FILES or not path.is_file():
        raise Problem(404, f"no such file of the API page: {name!r}", kind="not-found")
    cache_control = IMMUTABLE if stamped == stamp() else "no-cache"
    return FileResponse(path, media_type=FILES[name], headers={"Cache-Control": cache_control})
