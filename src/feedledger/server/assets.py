"""The dashboard's static files (server/static/): their version stamp, each page's ES
module graph (for the shell's `<link rel="modulepreload">`) and their responses.

Assets are served under a version-stamped path, `/static/v<hash>/js/app.js`, the hash
over every file of server/static/: a stamped URL never changes content, so it is cached
for a year (`immutable`) and a new release (or any edit) gets new URLs. The stamp is a
path segment, not a query, so the modules' relative imports (`./api.js`) inherit it.
The unstamped `/static/...` still answers, revalidated on every load (`no-cache`)."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

from fastapi.responses import FileResponse, Response

from feedledger.server.problems import Problem

STATIC = Path(__file__).parent / "static"
TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
}
IMMUTABLE = "public, max-age=31536000, immutable"
_STAMP = re.compile(r"v[0-9a-f]{12}")
# a module's static imports of its siblings: `import { a } from "./api.js";`
_IMPORT = re.compile(r"""^\s*import\b[^"';]*?["']\./([\w.-]+\.js)["']""", re.MULTILINE)


@cache
def version() -> str:
    """The stamp of the static files as shipped: `v` and 12 hex digits of their hash."""
    digest = hashlib.sha256()
    for path in sorted(p for p in STATIC.rglob("*") if p.is_file()):
        digest.update(path.relative_to(STATIC).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return "v" + digest.hexdigest()[:12]


@cache
def _imports(module: str) -> tuple[str, ...]:
    path = STATIC / "js" / module
    return tuple(_IMPORT.findall(path.read_text(encoding="utf-8"))) if path.is_file() else ()


@cache
def module_graph(page: str) -> tuple[str, ...]:
    """The modules page `page` runs: app.js, the page's module (js/<page>.js, which
    app.js imports) and their static imports, transitively."""
    seen: list[str] = []
    todo = ["app.js", f"{page}.js"]
    while todo:
        module = todo.pop(0)
        if module in seen or not (STATIC / "js" / module).is_file():
            continue
        seen.append(module)
        todo.extend(_imports(module))
    return tuple(seen)


def static_file(path: str, headers: dict[str, str]) -> Response:
    """The file `path` of server/static/ (nothing outside it, no hidden file); under
    the current version stamp with the year-long cache, else with `headers`'. Any
    other path: a 404 problem (RFC 9457), like the API's."""
    first, _, rest = path.partition("/")
    if _STAMP.fullmatch(first) and rest:
        path = rest
        if first == version():
            headers = {**headers, "Cache-Control": IMMUTABLE}
    target = (STATIC / path).resolve()
    known = target.suffix in TYPES and target.is_file() and STATIC.resolve() in target.parents
    if not known or any(part.startswith(".") for part in Path(path).parts):
        raise Problem(404, f"no static file {path!r}", kind="not-found")
    return FileResponse(target, media_type=TYPES[target.suffix], headers=headers)
