"""How `Source` (api/source.py) does its heavier work, private to api/: `base`
(`SourceBase`: its name, declaration and typed times), `snapshot_methods` (its snapshot
methods, a class `Source` extends), `payloads` (a
payload's bytes ingested or archived, a run's result typed), `snapshots` (a snapshot's
batches and its gap check), `history_frame` (an entity's or a source's history as a
Polars frame). `Source`'s methods stay thin and call these.

May import: what api/ may (the pipeline and everything under it, never SQL), and the
api modules under `Source` (results, times, windows); never `api.source` or
`api.ledger` back.
"""
