"""Orchestration of runs on one source, and the read-side helpers the API calls.

Top level: `scheduling` (one scheduler decision), `peek` (what the publisher states
now), `health`, `retract`, `review`, `manual` (gaps and freezes by hand), `query`
(as-of, history), `verify`, `resident` (what a scheduler keeps warm, for `health`).
Subpackages: `intake/` (a payload taken in as a live run: `run`, fetch + ingest;
`ingest`, archive then apply; `ingest_file`, `archiving`, `stages`, `apply`, `bounded`,
`allocators`, `observing`), `catchup/` (served, assess, backfill and replay, their
report, recovery), `exports/`
(snapshots written as CSV, JSON lines, Parquet and the GIS formats) and `doctor/` (the
workspace checked as a whole: `feedledger doctor`).

May import: `context`, the ledger, `notify` and `sync` (a run's outbox, a destination's
lag), `formats`, `diff`, `archive`, `sources`, `model` and the leaf utilities (`ahead`,
`timing`, `faults`). Holds no SQL (the ledger's storage functions do). Imported by the
API (and the scheduler), never by the ledger or the layers under it.
"""
