"""Read-side pipeline functions used by the CLI (resolving keys, as-of status...)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from feedledger.formats.canonical import RawNumber, canonical
from feedledger.ledger import queries
from feedledger.ledger.records import Version
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import from_us, iso, parse_instant, to_us, zone
from feedledger.model.types import AsOfStatus
from feedledger.pipeline.context import Context


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


def resolve_key(ctx: Context, src: SourceConfig, key: str) -> str:
    candidates = key_candidates(src, key)
    for cand in candidates:
        if queries.key_exists(ctx.store, src.name, cand):
            return cand
    raise NotFoundError(f"no entity with key {key!r} has ever been recorded", source=src.name)


def instant(src: SourceConfig, text: str | None, what: str) -> int | None:
    if text is None:
        return None
    return to_us(parse_instant(text, src.timezone, what=what))


def instant_end(src: SourceConfig, text: str | None, what: str) -> int | None:
    """Like `instant`, but a bare date means the END of that day (inclusive bound)."""
    value = instant(src, text, what)
    if value is None or text is None or len(text.strip()) != 10:
        return value
    start = from_us(value).astimezone(zone(src.timezone))
    nxt = (start + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return to_us(nxt) - 1


def history(
    ctx: Context, source: str, key: str, *, include_retracted: bool, known_at: str | None
) -> list[Version]:
    src = ctx.workspace.source(source)
    k = instant(src, known_at, "--known-at")
    return queries.history(
        ctx.store,
        src.name,
        resolve_key(ctx, src, key),
        include_retracted=include_retracted,
        known_at=k,
    )


def asof(
    ctx: Context, source: str, key: str, *, valid: str, known_at: str | None
) -> dict[str, Any]:
    """present / absent / not_observed at valid time `valid`, as known at `known_at`.

    Inside a gap (a stretch the source was not observed) the answer is `not_observed`,
    with the version in force just before the gap (`last_observed`) and the first one
    recorded after it (`next_observed`), instead of a confident answer we do not have."""
    from feedledger.ledger import gaps

    src = ctx.workspace.source(source)
    valid_us = instant(src, valid, "--valid")
    assert valid_us is not None
    k = instant(src, known_at, "--known-at")
    try:
        canon: str | None = resolve_key(ctx, src, key)
    except NotFoundError:
        canon = None
    gap = gaps.at(ctx.store, src.name, valid_us, k)
    if gap is not None and (
        queries.first_observation(ctx.store, src.name, gap.start_at, valid_us, k) is not None
    ):
        gap = None  # a payload published inside the gap was applied later: observed
    if gap is not None:
        chain = queries.history(ctx.store, src.name, canon, known_at=k) if canon else []
        before = [v for v in chain if v.valid_from < gap.start_at]
        after = [v for v in chain if v.valid_from >= gap.end_at]
        return {
            "status": AsOfStatus.NOT_OBSERVED.value,
            "version": None,
            "gap": gap,
            "last_observed": before[-1] if before else None,
            "next_observed": after[0] if after else None,
        }
    if canon is None:
        return {"status": AsOfStatus.ABSENT.value, "version": None}
    version = queries.asof(ctx.store, src.name, canon, valid_us, k)
    if version is None:
        return {"status": AsOfStatus.ABSENT.value, "version": None}
    status = AsOfStatus.ABSENT if version.deleted else AsOfStatus.PRESENT
    return {"status": status.value, "version": version}


def history_with_gaps(
    ctx: Context, source: str, key: str, *, include_retracted: bool, known_at: str | None
) -> list[dict[str, Any]]:
    """Versions and the source's gaps in one valid-time line: each item is a version
    (`"type": "version"`) or a gap (`"type": "gap"`, with start, end, reason)."""
    from feedledger.ledger import gaps

    src = ctx.workspace.source(source)
    k = instant(src, known_at, "--known-at")
    versions = history(ctx, source, key, include_retracted=include_retracted, known_at=known_at)
    stretches = gaps.listing(ctx.store, src.name, known_at=k, include_retracted=include_retracted)
    items: list[tuple[int, int, dict[str, Any]]] = [
        (v.valid_from, 0, {"type": "version", **v.to_json()}) for v in versions
    ]
    for g in stretches:
        # a gap ends where a payload published inside it was applied (observed again)
        seen = queries.first_observation(ctx.store, src.name, g.start_at, g.end_at - 1, k)
        if seen == g.start_at:
            continue
        item = {"type": "gap", **g.to_json()}
        if seen is not None:
            item["end"] = iso(seen)
        items.append((g.start_at, 1, item))
    return [item for _t, _o, item in sorted(items, key=lambda x: (x[0], x[1]))]


def list_gaps(
    ctx: Context, source: str, *, include_retracted: bool = False, known_at: str | None = None
) -> list[Any]:
    from feedledger.ledger import gaps

    src = ctx.workspace.source(source)
    k = instant(src, known_at, "--known-at")
    return gaps.listing(ctx.store, src.name, known_at=k, include_retracted=include_retracted)


def snapshot_rows(
    ctx: Context, source: str, *, valid: str, known_at: str | None
) -> Iterator[tuple[str, str]]:
    src = ctx.workspace.source(source)
    valid_us = instant(src, valid, "--valid")
    assert valid_us is not None
    return queries.snapshot(ctx.store, src.name, valid_us, instant(src, known_at, "--known-at"))
