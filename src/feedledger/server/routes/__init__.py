"""The JSON API's routers under /api, one module per resource: `sources` (a source, its
runs, an entity's asof and history), `streaming` (a snapshot streamed as CSV, JSON lines
or Parquet), `runs` (runs by id, their changes, review), `destinations` (destinations,
their status and search) and `writes` (the bearer-token writes, recorded in the write
audit). `server/app.py` includes each one's `router`."""
