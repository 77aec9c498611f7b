"""`Destination.explain(key)`: why a destination holds what it holds for one key, typed.
`to_json()` is exactly `sync-explain --json`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from feedledger.model.types import Outcome


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


@dataclass(frozen=True)
class Incoming:
    """What a sync offered the destination for the key."""

    revision: int | None
    generation: str | None
    content_hash: str | None


@dataclass(frozen=True)
class ExplainVerdict:
    """One route's latest guard verdict for the key (`scope`: `live`, or `manifest`
    with the manifest's name)."""

    scope: str
    manifest: str | None
    verdict: Outcome
    reason: str | None
    incoming: Incoming
    evidence: Any
    attempts: int
    at: datetime | None
    _raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, v: dict[str, Any]) -> ExplainVerdict:
        inc = v["incoming"]
        return cls(
            scope=v["scope"],
            manifest=v["manifest"],
            verdict=Outcome(v["verdict"]),
            reason=v["reason"],
            incoming=Incoming(inc["revision"], inc["generation"], inc["content_hash"]),
            evidence=v["evidence"],
            attempts=v["attempts"],
            at=_when(v["at"]),
            _raw=v,
        )

    def to_json(self) -> dict[str, Any]:
        return self._raw


@dataclass(frozen=True)
class HeldRow:
    """The row the destination holds for the key (a tombstone when `deleted`)."""

    revision: int
    generation: str | None
    content_hash: str | None
    deleted: bool
    written_at: datetime | None


@dataclass(frozen=True)
class Explanation:
    """The row held now (None: none) and every route's latest verdict, newest first
    (`last`: the newest)."""

    destination: str
    source: str
    key: Any  # the key values (a list: compound keys field by field)
    held: HeldRow | None
    verdicts: list[ExplainVerdict]
    _raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def last(self) -> ExplainVerdict | None:
        return self.verdicts[0] if self.verdicts else None

    @classmethod
    def of(cls, d: dict[str, Any]) -> Explanation:
        h = d["held"]
        held = (
            None
            if h is None
            else HeldRow(
                h["revision"],
                h["generation"],
                h["content_hash"],
                h["deleted"],
                _when(h["written_at"]),
            )
        )
        return cls(
            d["destination"],
            d["source"],
            d["key"],
            held,
            [ExplainVerdict.of(v) for v in d["verdicts"]],
            d,
        )

    def to_json(self) -> dict[str, Any]:
        return self._raw
