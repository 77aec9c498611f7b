"""Publisher dates in file names, and the value types every fetcher returns."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from feedledger.model.timeutil import to_us, zone

# YYYY-MM-DD, YYYY_MM_DD or YYYYMMDD (one separator, used twice), optionally followed by
# THHMMSS / THHMM (colons allowed) and an optional Z. Not part of a longer digit run.
_DATE_IN_NAME_RE = re.compile(
    r"(?<!\d)(?P<y>\d{4})(?P<sep>[-_]?)(?P<m>\d{2})(?P=sep)(?P<d>\d{2})"
    r"(?:[Tt](?P<H>\d{2}):?(?P<M>\d{2})(?::?(?P<S>\d{2}))?(?P<z>[Zz])?)?"
    r"(?!\d)"
)
_MIN_YEAR = 1970
_MAX_YEAR = 2999


@dataclass(frozen=True)
class Fetched:
    """What a fetcher got: the bytes and what is known about them before parsing."""

    data: bytes | None  # None = HTTP 304 not modified (nothing new)
    published_at: int | None  # us UTC from file name / HTTP header; None if from a field
    original_name: str  # file name or URL
    content_type: str | None
    etag: str | None = None
    last_modified: str | None = None
    # what a portal connector states about the payload (ArcGIS: the layer's metadata),
    # recorded in its archive sidecar
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class FetchState:
    """Validators remembered from the previous HTTP fetch, for a conditional GET."""

    etag: str | None
    last_modified: str | None
    url: str


def date_in_name(name: str, tz: str) -> int | None:
    """The publisher instant carried by a file name, as us UTC; None if there is none.

    A date alone means midnight in `tz`; a time without `Z` is read in `tz`, with `Z`
    in UTC. Impossible dates (2026-13-45) do not count. When a name carries several
    valid dates, the last one (closest to the extension) wins.
    """
    local = zone(tz)
    found: int | None = None
    for match in _DATE_IN_NAME_RE.finditer(name):
        year, month, day = int(match["y"]), int(match["m"]), int(match["d"])
        if not _MIN_YEAR <= year <= _MAX_YEAR:
            continue
        hour = int(match["H"]) if match["H"] else 0
        minute = int(match["M"]) if match["M"] else 0
        second = int(match["S"]) if match["S"] else 0
        tzinfo = UTC if match["z"] else local
        try:
            value = datetime(year, month, day, hour, minute, second, tzinfo=tzinfo)
        except ValueError:
            continue
        found = to_us(value.astimezone(UTC))
    return found
