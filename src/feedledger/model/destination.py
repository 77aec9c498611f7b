"""Destination declarations and the orderings their guard compares: transform
generations (`M-3` < `M-4`: by the number they end with) and source revisions (an
integer, or an ISO timestamp taken as its instant)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import iso

# The content hash of a tombstone row: a record the source deleted (the hash of
# b"\x00tombstone", sync.transform.content_hash(None)), or one the transform left out
# ("not in this destination", b"\x00filtered"). Only the first is a deletion in the
# revision order (sync/target.py): a newer transform generation may bring the second back.
TOMBSTONE_HASH = "e757743108b4054490c492b9bb76b153"
FILTERED_HASH = "0b3f4eca9c9755a0fac3eadecd7b5588"


def is_deletion(deleted: object, content_hash: object) -> bool:
    """Whether a destination row (or a document) is a deletion in the revision order: a
    tombstone of a record the source deleted, not one the transform left out."""
    return bool(deleted) and content_hash == TOMBSTONE_HASH


_GENERATION_RE = re.compile(r"^[A-Za-z0-9_.:-]{0,56}?(\d{1,15})$")
_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_FIELD_RE = re.compile(r"^[^\s,]{1,128}$")

# sync/kinds: the one place each is opened
Kind = Literal["postgres", "sqlite", "gpkg", "tantivy", "postgis"]


def generation_rank(generation: str) -> int:
    """The order of a transform generation: the number it ends with (`M-4` -> 4)."""
    match = _GENERATION_RE.match(generation)
    if match is None:
        raise ConfigError(
            f"transform generation {generation!r} must end with a number that orders it, "
            "such as M-3, M-4 or 12"
        )
    return int(match.group(1))


def check_table(name: str) -> str:
    if not _TABLE_RE.match(name):
        raise ConfigError(
            f"destination table {name!r} must be a plain SQL identifier (letters, digits, "
            "underscores; at most 63 characters)"
        )
    return name


def check_fields(fields: tuple[str, ...]) -> tuple[str, ...]:
    for f in fields:
        if not _FIELD_RE.match(f):
            raise ConfigError(f"text field {f!r} is not a field name")
    return fields


@dataclass(frozen=True)
class Destination:
    name: str
    source: str
    kind: Kind
    url: str  # PostgreSQL URL, or the SQLite / GeoPackage file path
    table: str  # the table, or the GeoPackage layer
    text_fields: tuple[str, ...] = ()
    transform: str | None = None  # module:function
    generation: str = "M-1"
    created_at: int = 0
    paused_at: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "kind": self.kind,
            "url": _redact(self.url),
            "table": self.table,
            "text_fields": list(self.text_fields),
            "transform": self.transform,
            "generation": self.generation,
            "created_at": iso(self.created_at),
            "paused": self.paused_at is not None,
        }


def _redact(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
