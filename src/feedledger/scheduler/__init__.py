"""The scheduler: a long-running face (started by `feedledger scheduler`) that runs
every source with a fetch location on its cadence, recovers missed publications,
announces staleness and delivers notifications.

Holds: `loop` (the `Scheduler`: ticks, leases, workers, its JSON-lines log) and
`metrics` (the optional Prometheus endpoint).

May import: the layers under it (`feedledger.api`, `pipeline`, `notify`, `sync`,
`context`, `ledger` and those below, down to `model`); never `feedledger.cli` or
`feedledger.server`, nor SQL or a database driver (pyproject's [tool.importlinter])."""
