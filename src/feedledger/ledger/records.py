"""Row types returned by the ledger (frozen; JSON-ready via `to_json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from feedledger.model.jsonout import RawJSON
from feedledger.model.timeutil import iso


@dataclass(frozen=True, slots=True)
class Watermark:
    source: str
    published_at: int | None
    payload_id: str | None
    txn_seq: int
    recorded_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "published_at": iso(self.published_at),
            "payload_id": self.payload_id,
        }


@dataclass(frozen=True, slots=True)
class Version:
    version_id: int
    key: str
    valid_from: int
    valid_to: int | None
    recorded_at: int
    txn_seq: int
    retracted_at: int | None
    run_id: str
    payload_id: str
    backfill: bool
    deleted: bool
    change: str
    revision: str | None
    attributes: str | None
    # GIS sources: the geometry as stated (GeoJSON text; None for a tombstone or a
    # feature without one). `geo` says the source is a GIS one: only then does the JSON
    # carry a `geometry` member (other sources' JSON keeps its shape)
    geometry: str | None = None
    geo: bool = False

    def to_json(self) -> dict[str, Any]:
        data = {
            "key": RawJSON(self.key),
            "valid_from": iso(self.valid_from),
            "valid_to": iso(self.valid_to),
            "recorded_at": iso(self.recorded_at),
            "retracted_at": iso(self.retracted_at),
            "run_id": self.run_id,
            "payload_id": self.payload_id,
            "backfill": self.backfill,
            "deleted": self.deleted,
            "attributes": RawJSON(self.attributes) if self.attributes is not None else None,
        }
        if self.geo:
            data["geometry"] = RawJSON(self.geometry) if self.geometry is not None else None
        return data


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    source: str
    kind: str
    status: str
    started_at: int
    finished_at: int | None
    payloads: int
    changes: int
    holder: str
    parent_run_id: str | None
    error: str | None
    window_start: int | None = None  # a backfill's requested window (inclusive)
    window_end: int | None = None
    resumptions: str | None = None  # JSON list: each interruption and its resumption
    # when everything the run wrote (applications, gap records) was retracted (None:
    # some of it stands, or it wrote nothing), and the runs that retracted any of it
    retracted_at: int | None = None
    retracted_by: tuple[str, ...] = ()

    @property
    def resumed(self) -> list[dict[str, Any]]:
        """[{"status", "error", "interrupted_at", "resumed_at"}] oldest first (instants
        in microseconds)."""
        if not self.resumptions:
            return []
        items: list[dict[str, Any]] = json.loads(self.resumptions)
        return items

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "kind": self.kind,
            "status": self.status,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "payloads": self.payloads,
            "changes": self.changes,
            "parent_run_id": self.parent_run_id,
            "error": self.error,
            "resumed": [
                {
                    "status": r["status"],
                    "error": r["error"],
                    "interrupted_at": iso(r["interrupted_at"]),
                    "resumed_at": iso(r["resumed_at"]),
                }
                for r in self.resumed
            ],
            "retracted_at": iso(self.retracted_at),
            "retracted_by": list(self.retracted_by),
        }


def geometry_changed(before_hash: int | None, after_hash: int | None) -> bool:
    """Whether a change moved the geometry, judged on the canonical geometry hashes of
    the version before and after it (None: no geometry -- a tombstone, a key not seen
    before, a feature without one): added with a geometry, deleted with one, or a
    different canonical geometry."""
    return before_hash != after_hash


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    change: str
    valid_from: int
    before: str | None
    after: str | None
    payload_id: str
    # GIS sources only (None otherwise, and then not in the JSON): whether the geometry
    # differs from the previous version's, judged on the canonical geometry hash
    geometry_changed: bool | None = None

    def to_json(self) -> dict[str, Any]:
        data = {
            "key": RawJSON(self.key),
            "change": self.change,
            "valid_from": iso(self.valid_from),
            "before": RawJSON(self.before) if self.before is not None else None,
            "after": RawJSON(self.after) if self.after is not None else None,
            "payload_id": self.payload_id,
        }
        if self.geometry_changed is not None:
            data["geometry_changed"] = self.geometry_changed
        return data


@dataclass(frozen=True, slots=True)
class Application:
    payload_id: str
    run_id: str
    txn_seq: int
    recorded_at: int
    published_at: int
    changes: int


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch [start_at, end_at) of valid time in which the source was not observed."""

    gap_id: int
    source: str
    start_at: int
    end_at: int
    reason: str
    run_id: str
    recorded_at: int
    retracted_at: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "start": iso(self.start_at),
            "end": iso(self.end_at),
            "reason": self.reason,
            "run_id": self.run_id,
            "recorded_at": iso(self.recorded_at),
            "retracted_at": iso(self.retracted_at),
        }
