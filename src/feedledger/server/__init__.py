"""`feedledger serve`: the HTTP face (FastAPI on uvicorn) over the public API -- JSON
endpoints under /api (OpenAPI at /docs), writes only with a bearer token, and the
dashboard's pages (server/pages.py, server/static/).

A face like the CLI: it uses only `feedledger.api`, the top-level names and
`feedledger.model`; it holds no SQL."""
