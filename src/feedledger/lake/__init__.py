"""The history as a Delta Lake table (`pip install 'feedledger[delta]'`; issue 32):
`feedledger export delta SOURCE... --to URI`, and the scheduler's export after each run
of a followed source.

The feature whole, its orchestration and its table: `export` (one call: positions,
reads, one Delta commit), `rows` (versions as the table's rows; which rows a call
writes), `columns` (attributes as typed columns), `target` (the Delta table: where,
its position, the commit -- the one module importing `deltalake`, lazily), `positions`
(storage: the `delta_exports` table, migration 0016).

Sits under the public API (`api`) and over the pipeline, whose typed-column rule and
field order (`pipeline/exports`) it reuses; reads versions through the ledger's readers
(`ledger/readers/history_rows.py`).
"""
