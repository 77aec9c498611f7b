"""The dashboard's pages: stable URLs a user can paste into a ticket, each an HTML shell
(server/static/shell.html) naming its page and parameters, rendered in the browser by
the page's ES module (server/static/js/) over the JSON API. Every asset ships in the
package (no CDN, no build step). Also the two JSON answers only the dashboard needs:
whether writes are enabled, and a source's publication calendar."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import date
from functools import cache

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

import feedledger as fl
from feedledger.server.assets import STATIC, module_graph, static_file, version
from feedledger.server.deps import JSONText, entity_key, ledger

router = APIRouter()

# Only the package's own files run or load: no inline script, no other origin.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


# a page's first data request, the same as app.js's FIRST (same URL, so the browser's
# preload is the response app.js's fetch() gets)
FIRST = {"board": "/api/health"}


@cache
def _shell() -> str:
    return (STATIC / "shell.html").read_text(encoding="utf-8")


def page(
    request: Request, which: str, title: str, status_code: int = 200, **params: str
) -> HTMLResponse:
    """The shell of page `which`, its parameters as `data-*` attributes (escaped), its
    links under the server's root path (`serve --root-path`, behind a proxy), its
    assets under the version stamp (server/assets.py) and its whole module graph
    preloaded (the browser fetches it at once, not import after import)."""
    root = html.escape(str(request.scope.get("root_path") or "").rstrip("/"), quote=True)
    data = {"page": which, **params}
    attrs = " ".join(f'data-{k}="{html.escape(v, quote=True)}"' for k, v in data.items())
    attrs += f' data-root="{root}"'
    static = f"{root}/static/{version()}"
    links = [f'<link rel="modulepreload" href="{static}/js/{m}">' for m in module_graph(which)]
    if which in FIRST:  # fetched while the HTML parses; app.js's fetch() takes it over
        links.insert(0, f'<link rel="preload" href="{root}{FIRST[which]}" as="fetch" crossorigin>')
    preload = "\n".join(links)
    fills = {"title": html.escape(title), "data": attrs, "root": root}
    fills |= {"static": static, "preload": preload}
    # one pass: a value holding "{root}" or "{data}" is text, never a placeholder
    text = re.sub(r"\{(title|data|root|static|preload)\}", lambda m: fills[m.group(1)], _shell())
    return HTMLResponse(text, status_code=status_code, headers=HEADERS)


# what answers RFC 9457 problem details when not found; any other path is a page's
API_PREFIXES = ("/api/", "/static/", "/docs/")
API_PATHS = ("/api", "/static", "/openapi.json")


def not_found(request: Request) -> HTMLResponse | None:
    """The dashboard's not-found page (HTTP 404) for a page URL that names no page;
    None for the API's, static files' and OpenAPI's paths (they answer a problem)."""
    root = str(request.scope.get("root_path") or "").rstrip("/")
    path = request.url.path
    if root and path.startswith(root):
        path = path[len(root) :]
    if path in API_PATHS or path.startswith(API_PREFIXES):
        return None
    return page(request, "notfound", "Not found", status_code=404, path=path, reason="")


def _unknown(request: Request, lookup: Callable[[], object]) -> HTMLResponse | None:
    """The not-found page (404) with the reason if `lookup` finds nothing (the source,
    run or destination a pasted URL names), else None: the page itself."""
    try:
        lookup()
    except fl.NotFoundError as exc:
        scrub = getattr(request.app.state, "scrub", None)
        reason = scrub(str(exc)) if scrub is not None else str(exc)
        path = request.url.path
        return page(request, "notfound", "Not found", status_code=404, path=path, reason=reason)
    except fl.ConfigError:  # an ambiguous run id prefix: the page says so
        return None
    return None


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
def board(request: Request) -> HTMLResponse:
    return page(request, "board", "Sources")


@router.api_route("/sources/{source}", methods=["GET", "HEAD"], include_in_schema=False)
def source_page(request: Request, source: str, led: fl.Ledger = Depends(ledger)) -> HTMLResponse:
    missing = _unknown(request, lambda: led.source(source))
    return missing or page(request, "source", f"Source {source}", source=source)


@router.api_route(
    "/sources/{source}/entities/{key:path}", methods=["GET", "HEAD"], include_in_schema=False
)
def entity_page(
    request: Request, source: str, key: str, led: fl.Ledger = Depends(ledger)
) -> HTMLResponse:
    def lookup() -> object:  # the source, and a key it ever had a version of
        src = led.source(source)
        return src.history(entity_key(src, key), include_retracted=True)

    missing = _unknown(request, lookup)
    return missing or page(request, "entity", f"{source} · {key}", source=source, key=key)


@router.api_route("/runs/{run_id}", methods=["GET", "HEAD"], include_in_schema=False)
def run_page(request: Request, run_id: str, led: fl.Ledger = Depends(ledger)) -> HTMLResponse:
    missing = _unknown(request, lambda: led.resolve_run(run_id))
    return missing or page(request, "run", f"Run {run_id[:8]}", run=run_id)


@router.api_route("/destinations/{name}", methods=["GET", "HEAD"], include_in_schema=False)
def destination_page(request: Request, name: str, led: fl.Ledger = Depends(ledger)) -> HTMLResponse:
    missing = _unknown(request, lambda: led.destination(name))
    return missing or page(request, "destination", f"Destination {name}", name=name)


@router.api_route("/review", methods=["GET", "HEAD"], include_in_schema=False)
def review_page(request: Request) -> HTMLResponse:
    return page(request, "review", "Review held bursts")


@router.api_route("/static/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
def static(path: str) -> Response:
    """A file of server/static/ (nothing outside it, no hidden file); cached for a
    year under the current version stamp (`/static/v<hash>/...`)."""
    return static_file(path, HEADERS)


@router.get(
    "/api/dashboard", response_class=JSONText, tags=["dashboard"], summary="Dashboard flags"
)
def dashboard(request: Request) -> JSONText:
    """What the dashboard shows: `writes` is true when a write token is configured
    (the review page then offers release / retract)."""
    return JSONText({"writes": bool(getattr(request.app.state, "tokens", None))})


@router.get(
    "/api/sources/{source}/calendar",
    response_class=JSONText,
    tags=["dashboard"],
    summary="A source's publication calendar",
)
def source_calendar(
    source: str,
    start: date | None = Query(None, alias="from", description="First day (YYYY-MM-DD)."),
    end: date | None = Query(None, alias="to", description="Last day (YYYY-MM-DD)."),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    """One cell per expected publication day (and per day a publication arrived on
    outside the cadence): `live`, `backfill`, `held`, `retracted`, `gap`, `late`,
    `waiting` or `missed`, with the run that applied it; at most a year and a day
    (default: from the source's first publication or gap to today)."""
    return JSONText(led.source(source).calendar(start, end).to_json())
