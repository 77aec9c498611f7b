"""Destinations: guarded projections of the ledger's current state (live route,
rebuild from a manifest, reconcile).

Holds: its tables and storage (`tables`, `registry`, `manifests`, `state`, `target`),
the guard (`guard`), the routes (`live`, `rebuild`), `reconcile`, `destinations`,
`transform` and `versions`.

May import: `feedledger.context`, `feedledger.ledger`, `diff`, `formats`, `archive`,
`sources`, `config`, `model` and the leaf utilities; never its sibling
`feedledger.notify` or a layer above (pipeline, api, the faces). SQL only in its
storage modules, listed in pyproject's [tool.importlinter] "storage" contract."""
