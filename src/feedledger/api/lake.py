"""The history as a Delta Lake table (`Ledger.export_delta`, `Ledger.delta_exports`):
the public face of `feedledger.lake`, imported only when called (the `delta` extra)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feedledger.context import Context
from feedledger.model.timeutil import iso

if TYPE_CHECKING:
    from feedledger.lake.export import DeltaExport

# (source, stage, done, total): stage "read" (versions read so far; total 0: unknown),
# "rows" (the rows to write), "commit" (0 of 1 before the Delta commit, 1 of 1 after)
OnDeltaProgress = Callable[[str, str, int, int], None]


@dataclass(frozen=True)
class DeltaPosition:
    """How far a Delta table holds a source (`export delta --status`)."""

    target: str
    source: str
    known_at: int  # the transaction instant the table reflects (µs)
    delta_version: int
    exported_at: int
    follow: bool  # the scheduler exports after each run of the source

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "source": self.source,
            "known_at": iso(self.known_at),
            "delta_version": self.delta_version,
            "exported_at": iso(self.exported_at),
            "follow": self.follow,
        }


def export_delta(
    ctx: Context,
    sources: Sequence[str],
    to: str | os.PathLike[str],
    *,
    progress: OnDeltaProgress | None = None,
    follow: bool | None = None,
) -> DeltaExport:
    from feedledger.lake.export import export  # lazy: the delta extra

    return export(ctx, list(sources), os.fspath(to), progress=progress, follow=follow)


def delta_exports(ctx: Context, to: str | os.PathLike[str] | None = None) -> list[DeltaPosition]:
    from feedledger.lake.export import status  # lazy: the delta extra

    found = status(ctx, os.fspath(to) if to is not None else None)
    return [
        DeltaPosition(p.target, p.source, p.known_at, p.delta_version, p.exported_at, p.follow)
        for p in found
    ]
