"""`feedledger serve`: the HTTP face (FastAPI on uvicorn) over the public API -- JSON
endpoints under /api (OpenAPI at /docs), writes only with a bearer token, and the
dashboard's pages (server/pages.py, server/static/).

Holds: `app` (the application and its lifespan), `run` (uvicorn, one or N workers),
`problems` (errors as RFC 9457 problem details), `auth`, `deps`, `routes/` (the /api
routers), `fastpath`, `ogc` + `ogc_params`, `docs`, `pages` + `assets` + `static/`.

May import: `feedledger.api`, the top-level names and `feedledger.model` (a face like
the CLI); never `feedledger.cli` or `feedledger.scheduler`, the layers under the API
(ledger, pipeline, archive, sources, notify, sync, context, config), nor SQL
(pyproject's [tool.importlinter] contracts)."""
