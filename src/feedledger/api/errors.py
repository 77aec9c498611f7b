"""The warning and error of a snapshot inside a gap (`GapWarning`, `InGap`). (A
database's errors reach the API as FeedledgerErrors already: ledger/failures.py.)"""

from __future__ import annotations

from typing import Any

from feedledger.model.errors import ConfigError


class GapWarning(UserWarning):
    """A snapshot asked for a valid time inside a standing gap (a stretch the source was
    not observed): the rows are the state as last observed before it, not an
    observation. `Source.snapshot`, `snapshot_batches` and `export_snapshot` warn with
    it; `.gap` is the `SnapshotGap`."""

    def __init__(self, text: str, gap: Any) -> None:
        super().__init__(text)
        self.gap = gap


class InGap(ConfigError):
    """A snapshot with `strict=True` (CLI `--strict`, HTTP `?strict=1`) asked for a
    valid time inside a standing gap: refused, nothing read or written. `.gap` is the
    `SnapshotGap` (the gap, the last and next observation around it). Exit code 2, HTTP
    409."""

    def __init__(self, text: str, gap: Any, *, source: str, hint: str | None = None) -> None:
        super().__init__(text, source=source, hint=hint)
        self.gap = gap


def gap_text(source: str, valid: str, inside: Any) -> str:
    """What a snapshot inside a standing gap says (the CLI's warning, `GapWarning`,
    `InGap`): the valid time, the gap and its reason, the last and next observation."""
    gap = inside.gap
    last, nxt = inside.last_observed_at, inside.next_observed_at
    return (
        f"{valid} is inside a gap {gap.start.isoformat()} .. {gap.end.isoformat()} "
        f"({gap.reason}): {source} was not observed then; last observed "
        f"{last.isoformat() if last else 'never'}, next observed "
        f"{nxt.isoformat() if nxt else 'not yet'}"
    )


class NotObserved(ConfigError):
    """A layer asked for at a valid time before the source's first observation (or of
    a source never observed): nothing was observed then, so no state is answered --
    never the nearest one (`Source.layer()`; HTTP 409, problem type `not-observed`)."""
