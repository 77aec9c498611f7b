"""The bitemporal core: payloads, versions, runs, gaps, watermark, leases
(docs/architecture.md, "ledger/").

At this level, one module per thing the ledger keeps: `schema` (the tables; created
only by `migrations/`), `engine` (engines for both backends), `failures` (driver errors
mapped to feedledger's), `store` (the one store interface: payload index, watermarks,
applications, the recorded CRS), `payload_txn` (a payload's one transaction) with `bulk`
and `staging` (its bulk writes), `records` (row types), `visibility` (the two rules:
known at K, latest per key), `queries`, `notices` (the outbox, holds for review),
`schedule_state`, `statecache` (the diff state: its file and its in-memory tier) with
`stateparts`, `audit`.

Subpackages: `runs/` (runs and who may start one: the runs table's writes in its
`__init__`, `lookup` its reads and run ids as people type them, `leases`, `holders`,
`freezes`, `backfills` (resuming a backfill, its last transaction), `retraction`),
`gaps/` (gap records in its `__init__`, `manual` a gap recorded by hand), `encoding/`
(the compact attribute texts: encode a batch, decode a batch), `readers/` (the
raw-driver reads: one entity, a source's rows as Arrow), `views/` (rows shaped for one
page or report).

May import: `diff`, `formats`, `model` and the leaf utilities (`timing`, `faults`,
`ahead`); SQLAlchemy, Alembic and the database drivers. Never a layer above it (the
`layers` contract); the one exception is `migrations/env.py`, which imports the
features' table declarations for Alembic's comparison. The top level (with `runs/`
and `gaps/`) never imports `views/` or `readers/`.
"""
