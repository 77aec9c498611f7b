"""Payload references: one published file/response, archived by content hash."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from feedledger.model.timeutil import iso


def payload_id_for(source: str, published_at_us: int, sha256: str) -> str:
    """Deterministic payload id: the same publication always gets the same id.

    It is derived from (source, publisher timestamp, content sha256) so that
    `archive reindex` rebuilds an identical index from the archive folder alone.
    """
    digest = hashlib.sha256(f"{source}\n{published_at_us}\n{sha256}".encode()).hexdigest()
    return digest[:24]


@dataclass(frozen=True, slots=True)
class PayloadRef:
    payload_id: str
    source: str
    sha256: str
    published_at: int  # microseconds since epoch, UTC (publisher's date)
    fetched_at: int  # microseconds since epoch, UTC (when we got the bytes)
    size: int
    original_name: str | None = None  # file name or URL
    content_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["published_at"] = iso(self.published_at)
        data["fetched_at"] = iso(self.fetched_at)
        return data

    @property
    def label(self) -> str:
        """How errors name this payload: its id and, where known, its original name."""
        if self.original_name:
            return f"{self.payload_id} ({self.original_name})"
        return self.payload_id
