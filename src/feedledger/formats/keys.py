"""Keys as a person types them: the canonical key texts a typed KEY may mean (shared by
the ledger's queries and the destinations feature)."""

from __future__ import annotations

import json

from feedledger.formats.canonical import RawNumber, canonical
from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig


def key_candidates(src: SourceConfig, key: str) -> list[str]:
    """Canonical key texts a user-typed KEY may mean.

    A single-field key is typed as its value (`0714-22-1`); a compound key as a JSON
    array in key-field order (`'["08","0714"]'`). A value that is also a JSON number
    may match a numeric key from a JSON source.
    """
    text = key.strip()
    if text.startswith("["):
        try:
            values = json.loads(text, parse_float=RawNumber, parse_int=RawNumber)
        except ValueError as exc:
            raise ConfigError(f"KEY {key!r} is not a JSON array: {exc}", source=src.name) from None
        if not isinstance(values, list) or len(values) != len(src.key):
            raise ConfigError(
                f"KEY must list {len(src.key)} value(s), one per key field {list(src.key)}",
                source=src.name,
            )
        as_text = "[" + ",".join(canonical(str(v)) for v in values) + "]"
        return list(dict.fromkeys([canonical(values), as_text]))
    if len(src.key) != 1:
        raise ConfigError(
            f"this source has a compound key {list(src.key)}: give KEY as a JSON array, "
            f"e.g. '{json.dumps(['v' + str(i + 1) for i in range(len(src.key))])}'",
            source=src.name,
        )
    out = [canonical([key])]
    try:
        parsed = json.loads(text, parse_float=RawNumber, parse_int=RawNumber)
        if isinstance(parsed, RawNumber):
            out.append(canonical([parsed]))
    except ValueError:
        pass
    return out
