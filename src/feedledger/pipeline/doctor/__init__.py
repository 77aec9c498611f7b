"""`feedledger doctor`: is this workspace healthy, and if not, what does each problem mean
and which command fixes it?

`findings` (the values: Finding, Check, Options and the thresholds, each with its
reason), `store_checks` (the schema's revision, PostgreSQL's settings, leases of gone
holders, dead letters, stale sources, destinations behind or unreconciled),
`data_checks` (state caches against history, archive objects read back, disk free) and
`examine` (runs them in order). Reads only: nothing is repaired here.
"""
