"""Read-side pipeline functions used by the CLI (resolving keys, as-of status...)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from feedledger.context import Context
from feedledger.formats.keys import key_candidates
from feedledger.ledger import gaps, queries
from feedledger.ledger.readers import read_entity
from feedledger.ledger.records import Gap, Version
from feedledger.model.errors import NotFoundError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import from_us, iso, parse_instant, to_us, zone
from feedledger.model.types import AsOfStatus


def resolve_key(ctx: Context, src: SourceConfig, key: str) -> str:
    candidates = key_candidates(src, key)
    for cand in candidates:
        if queries.key_exists(ctx.store, src.name, cand):
            return cand
    raise NotFoundError(f"no entity with key {key!r} has ever been recorded", source=src.name)


def instant(src: SourceConfig, text: str | int | None, what: str) -> int | None:
    """A time given on the command line (text), or already typed (UTC microseconds:
    the public API converts its date/datetime values first)."""
    if text is None or isinstance(text, int):
        return text
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
    ctx: Context, source: str, key: str, *, include_retracted: bool, known_at: str | int | None
) -> list[Version]:
    src = ctx.workspace.source(source)
    k = instant(src, known_at, "--known-at")
    found = read_entity(
        ctx.store,
        src.name,
        key_candidates(src, key),
        known_at=k,
        include_retracted=include_retracted,
        geo=src.is_geo,
    )
    if found.key is None:
        raise NotFoundError(f"no entity with key {key!r} has ever been recorded", source=src.name)
    return found.versions


def asof(
    ctx: Context, source: str, key: str, *, valid: str | int, known_at: str | int | None
) -> dict[str, Any]:
    """present / absent / not_observed / not_known at valid time `valid`, as known at
    `known_at`.

    Inside a standing gap (a stretch the source was not observed; `gaps.standing`) the
    answer is `not_observed`, with the version in force just before the gap
    (`last_observed`) and the key's state as the first payload applied after it stated
    it (`next_observed`, even if that payload left it unchanged; `next_observed_at` is
    that payload's publisher date), instead of a confident answer we do not have.
    Before anything of the source was recorded (at `known_at`, or ever) the ledger
    knew nothing: `not_known`, not `absent`. Before the source's first observation
    (its first applied payload's publisher date) nothing was observed: `not_observed`
    with `gap` None and that observation as `next_observed`. These three answers hold
    for every key; otherwise a key the source never had is a NotFoundError, as in
    `history`."""
    src = ctx.workspace.source(source)
    valid_us = instant(src, valid, "--valid")
    assert valid_us is not None
    k = instant(src, known_at, "--known-at")
    # the key's versions, the source's observations, first record and gaps: one read
    found = read_entity(
        ctx.store, src.name, key_candidates(src, key), known_at=k, geo=src.is_geo, context=True
    )
    observed = found.observed or []
    pieces = gaps.standing(
        ctx.store, src.name, src.timezone, known_at=k, observed=observed, listed=found.gaps
    )
    gap = next((g for g in pieces if g.start_at <= valid_us < g.end_at), None)
    if gap is not None:
        return {
            "status": AsOfStatus.NOT_OBSERVED.value,
            "version": None,
            "gap": gap,
            **_around(found.versions, gap, observed),
        }
    first = found.first_recorded
    if first is None or (k is not None and first > k):
        return {
            "status": AsOfStatus.NOT_KNOWN.value,
            "version": None,
            "first_recorded_at": iso(first),
        }
    if not observed or valid_us < observed[0]:
        # before the source's first observation (standing at K) nothing was observed:
        # not a gap anyone recorded, but no more an answer than one
        return {
            "status": AsOfStatus.NOT_OBSERVED.value,
            "version": None,
            "gap": None,
            **_before_first(found.versions, observed),
        }
    if found.key is None:
        # a key the source never had: as `history` answers it (exit 3, HTTP 404), never a
        # confident `absent` for what may be a mistyped key
        raise NotFoundError(f"no entity with key {key!r} has ever been recorded", source=src.name)
    chain = [v for v in found.versions if v.valid_from <= valid_us]
    version = chain[-1] if chain else None
    if version is None:
        return {"status": AsOfStatus.ABSENT.value, "version": None}
    status = AsOfStatus.ABSENT if version.deleted else AsOfStatus.PRESENT
    return {"status": status.value, "version": version}


def _before_first(chain: list[Version], observed: list[int]) -> dict[str, Any]:
    """`_around` for a valid time before the source's first observation: nothing before
    it, the state its first observation stated after it (None: nothing observed yet)."""
    first = observed[0] if observed else None
    found = [v for v in chain if first is not None and v.valid_from <= first]
    return {
        "last_observed": None,
        "next_observed": found[-1] if found else None,
        "last_observed_at": None,
        "next_observed_at": iso(first),
    }


def _gap_at(
    ctx: Context, src: SourceConfig, at_us: int, known_at: int | None, observed: list[int]
) -> Gap | None:
    pieces = gaps.standing(ctx.store, src.name, src.timezone, known_at=known_at, observed=observed)
    return next((g for g in pieces if g.start_at <= at_us < g.end_at), None)


def _around(chain: list[Version], gap: Gap, observed: list[int]) -> dict[str, Any]:
    """Last and next observation around a standing gap piece: the version in force just
    before it, and the state the first payload applied after it stated."""
    before = [t for t in observed if t < gap.start_at]
    after = [t for t in observed if t >= gap.end_at]
    next_at = after[0] if after else None

    def in_force(at_us: int) -> Version | None:
        found = [v for v in chain if v.valid_from <= at_us]
        return found[-1] if found else None

    return {
        "last_observed": in_force(gap.start_at - 1),
        "next_observed": in_force(next_at) if next_at is not None else None,
        "last_observed_at": iso(before[-1]) if before else None,
        "next_observed_at": iso(next_at),
    }


def history_with_gaps(
    ctx: Context, source: str, key: str, *, include_retracted: bool, known_at: str | int | None
) -> list[dict[str, Any]]:
    """Versions and the source's standing gaps in one valid-time line: each item is a
    version (`"type": "version"`) or a gap (`"type": "gap"`, with start, end, reason)."""
    versions = history(ctx, source, key, include_retracted=include_retracted, known_at=known_at)
    stretches = list_gaps(ctx, source, include_retracted=include_retracted, known_at=known_at)
    items: list[tuple[int, int, dict[str, Any]]] = [
        (v.valid_from, 0, {"type": "version", **v.to_json()}) for v in versions
    ]
    items += [(g.start_at, 1, {"type": "gap", **g.to_json()}) for g in stretches]
    return [item for _t, _o, item in sorted(items, key=lambda x: (x[0], x[1]))]


def list_gaps(
    ctx: Context, source: str, *, include_retracted: bool = False, known_at: str | int | None = None
) -> list[Gap]:
    """The source's standing gaps as `asof` judges them (`gaps.standing`: recorded gaps
    minus the days observed since); with `include_retracted`, also the retracted gap
    records, whole."""
    src = ctx.workspace.source(source)
    k = instant(src, known_at, "--known-at")
    found = gaps.standing(ctx.store, src.name, src.timezone, known_at=k)
    if include_retracted:
        visible = {g.gap_id for g in gaps.listing(ctx.store, src.name, known_at=k)}
        every = gaps.listing(ctx.store, src.name, known_at=k, include_retracted=True)
        found += [g for g in every if g.gap_id not in visible]
    return sorted(found, key=lambda g: (g.start_at, g.gap_id))


def snapshot_gap(
    ctx: Context, source: str, *, valid: str | int, known_at: str | int | None
) -> dict[str, Any] | None:
    """The standing gap `valid` falls in, with the publisher dates (UTC microseconds) of
    the source's last and next observation around it (`{"gap", "last_observed_at",
    "next_observed_at"}`), or None."""
    src = ctx.workspace.source(source)
    valid_us = instant(src, valid, "--valid")
    assert valid_us is not None
    k = instant(src, known_at, "--known-at")
    observed = gaps.observed_at(ctx.store, src.name, k)
    gap = _gap_at(ctx, src, valid_us, k, observed)
    if gap is None:
        return None
    before = [t for t in observed if t < gap.start_at]
    after = [t for t in observed if t >= gap.end_at]
    return {
        "gap": gap,
        "last_observed_at": before[-1] if before else None,
        "next_observed_at": after[0] if after else None,
    }
