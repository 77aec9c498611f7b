"""Snapshot/change-set diff (columnar): a payload's observations against the source's
current state -> added, changed, deleted, unchanged (`compute`, the state's schema).

May import: `feedledger.archive`, `feedledger.sources`, `feedledger.config`,
`feedledger.model` and the leaf utilities; never its sibling `feedledger.formats` or a
layer above, nor SQL (pyproject's [tool.importlinter])."""

from feedledger.diff.compute import (
    STATE_SCHEMA,
    DiffResult,
    compute,
    empty_state,
    first_load,
    next_state,
)

__all__ = ["STATE_SCHEMA", "DiffResult", "compute", "empty_state", "first_load", "next_state"]
