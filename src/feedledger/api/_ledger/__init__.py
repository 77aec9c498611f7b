"""What `Ledger` (api/ledger.py) holds in its own rooms, private to api/: `run_methods`
(runs by id: a whole id from a prefix, changes, retraction, review, run pages, the write
audit). `Ledger`'s other methods stay in api/ledger.py.

May import: what api/ may, and the api modules under `Ledger`; never `api.ledger` back
(the `api-one-door` contract).
"""
