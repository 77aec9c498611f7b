"""Orchestration of runs on one source, and the read-side helpers the API calls.

Top level: `ingest` (a live run: archive, then apply), `archiving` (the one way a
publication enters the archive and the index; `archive add`), `stages` (the ingest's
work run ahead on threads: archive hashing and store opening beside the parse), `apply`
(diff + the payload's one transaction), `run` (fetch + ingest, or a recovery),
`scheduling` (one scheduler decision), `observing` (a fetch that found nothing new
observed the source; the publisher date's problems), `health`, `retract`, `review`,
`manual` (gaps and freezes by hand), `query` (as-of, history), `verify`, `resident` (what
a scheduler keeps warm, for `health`). Subpackages:
`catchup/` (served, assess, backfill and replay, their report, recovery), `exports/`
(snapshots written as CSV, JSON lines, Parquet and the GIS formats) and `doctor/` (the
workspace checked as a whole: `feedledger doctor`).

May import: `context`, the ledger, `notify` and `sync` (a run's outbox, a destination's
lag), `formats`, `diff`, `archive`, `sources`, `model` and the leaf utilities (`ahead`,
`timing`, `faults`). Holds no SQL (the ledger's storage functions do). Imported by the
API (and the scheduler), never by the ledger or the layers under it.
"""
