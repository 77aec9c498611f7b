"""Runs by id, the `Ledger`'s (api/ledger.py): `methods` (its methods on them, a class
`Ledger` extends), `pages` (a run id from a unique prefix, runs across sources a page at
a time, one run's whole picture, its changes a page at a time), `review` (a live run held
for review, released or retracted), `audit` (the write audit about a run or a source).

May import: what api/ may, and the api modules under `Ledger` (results, times); never
`api.ledger` back (the `api-one-door` contract). The deprecated module-level calls stay
at their old paths for one release: api/runs_page.py, api/audit.py.
"""
