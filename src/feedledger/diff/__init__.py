"""Snapshot/change-set diff (columnar)."""

from feedledger.diff.compute import (
    STATE_SCHEMA,
    DiffResult,
    compute,
    empty_state,
    next_state,
)

__all__ = ["STATE_SCHEMA", "DiffResult", "compute", "empty_state", "next_state"]
