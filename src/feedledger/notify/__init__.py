"""Notifications: outbox rows fanned out into signed messages, delivered at least once.

Holds: its tables and storage (`tables`, `subscriptions`, `fanout`, `deliveries`,
`cancellations`, `run_deliveries`), the delivery loop (`dispatch`, `session`, `send`,
`signing`, `stream`), `corrections` and `operations`.

May import: `feedledger.context`, `feedledger.ledger`, `diff`, `formats`, `archive`,
`sources`, `config`, `model` and the leaf utilities; never its sibling
`feedledger.sync` or a layer above (pipeline, api, the faces). SQL only in its storage
modules, listed in pyproject's [tool.importlinter] "storage" contract."""
