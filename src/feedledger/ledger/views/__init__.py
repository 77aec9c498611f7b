"""Rows shaped for one page or report: what a face shows, read in as few statements as
that page needs.

* `calendar`: a source's applications with their runs (the dashboard's publication
  calendar, api/calendar.py);
* `health`: what `health` reads of all sources at once (one statement per table), and
  the same facts for one source (pipeline/health.py);
* `run_page`: what a run's page shows besides its row: the notices it queued and its
  changes a page at a time (api/runs/pages.py).

These would live with the face that shows them, but the faces (cli/, server/) may not
import the ledger and api/ may not import SQLAlchemy (the `cli` and `storage`
contracts in pyproject.toml): the SQL stays in the storage layer, grouped here.

May import: the ledger's core (`store`, `schema`, `queries`, `runs`, `leases`...).
Nothing in the ledger imports this package.
"""
