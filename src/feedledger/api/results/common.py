"""What every result type shares: `plain` (a value's JSON), the record-field readers, and
`Raw` (a result that keeps its record and answers it as its JSON)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from feedledger.model.jsonout import RawJSON


def plain(value: Any) -> Any:
    """`value` with every object that has `to_json` replaced by its JSON (RawJSON texts
    are kept: `model.jsonout.dumps` writes them verbatim, number literals intact)."""
    if isinstance(value, RawJSON):
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return plain(to_json())
    return value


def decoded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def instant_of(text: str | None) -> datetime | None:
    """An instant of a record's JSON (ISO-8601 text, `model.timeutil.iso`) as a datetime."""
    return None if text is None else datetime.fromisoformat(text)


def iso_of(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class Raw:
    """`to_json()` of the record the layer below returned."""

    _raw: Any

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]
