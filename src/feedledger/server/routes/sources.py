"""Read endpoints of sources and entities: `/api/health`, `/api/sources`,
`/api/sources/{source}`, an entity's `history` and `asof` (the CLI's `--json` shapes)."""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Query

import feedledger as fl
from feedledger.server.deps import JSONText, entity_key, in_reader, instant, ledger
from feedledger.server.problems import hide_password

router = APIRouter(prefix="/api", tags=["sources"])

LAST_RUNS = 20


def declaration(src: fl.SourceConfig) -> dict[str, Any]:
    """A source's declaration as `source list --json` prints it (a password in the
    fetch URL shown as ***)."""
    data: dict[str, Any] = src.model_dump(mode="json")
    data["key"] = list(src.key)
    if isinstance(data.get("fetch"), str):
        data["fetch"] = hide_password(data["fetch"])
    return data


@router.get("/health", response_class=JSONText, summary="Per-source health (as `health --json`)")
def health(
    strict: bool = Query(
        False,
        description="Answer 503 when any source is stale or its publisher date is wrong "
        "(ahead of the clock, or gone back with other content).",
    ),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    report = led.health()
    lags = [d.to_json() for d in led.destination_lag()]
    stale = [h.source for h in report if h.stale]
    dates = [h.source for h in report if h.publisher_date_problem]
    body = {
        "ok": not (stale or dates),
        "stale": stale,
        "publisher_date_problems": dates,
        "sources": [h.to_json() for h in report],
        "destinations": lags,
    }
    return JSONText(body, status_code=503 if strict and not body["ok"] else 200)


@router.get("/sources", response_class=JSONText, summary="Declared sources and their health")
def sources(led: fl.Ledger = Depends(ledger)) -> JSONText:
    """Each declaration (as `source list --json`) with its `health` (as `health --json`
    reports the source)."""
    health = {h.source: h.to_json() for h in led.health()}
    items = [{**declaration(s), "health": health.get(s.name)} for s in led.sources(by_name=False)]
    return JSONText(items)


@router.get("/sources/{source}", response_class=JSONText, summary="One source")
def source(source: str, led: fl.Ledger = Depends(ledger)) -> JSONText:
    """Declaration, watermark, cadence, freeze, gaps, health, its last runs and the
    writes made on it over the HTTP API (`audit`)."""
    src = led.source(source)
    found = led.health([source])
    health = found[0].to_json() if found else None
    body = {
        "name": src.name,
        "declaration": declaration(src.config),
        "cadence": src.config.cadence,
        "timezone": src.config.timezone,
        "watermark": src.watermark().to_json(),
        "frozen": bool(found and found[0].frozen),
        "health": health,
        "gaps": [g.to_json() for g in src.gaps()],
        "runs": led.runs_page(source=source, limit=LAST_RUNS).to_json()["runs"],
        # writes made over the HTTP API on the source or its runs (freeze, thaw...)
        "audit": [a.to_json() for a in led.audit_entries(source=source)],
    }
    return JSONText(body)


# a key the source never had (or an unknown source): `asof` and `history` agree
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "description": "An unknown source, or a key the source never had (no version "
        "recorded under it): a problem document (type `urn:feedledger:problem:not-found`). "
        "`asof` answers `not_known` and `not_observed` (inside a gap, before the source's "
        "first observation) for any key.",
        "content": {"application/problem+json": {}},
    }
}


@router.get(
    "/sources/{source}/entities/{key}/history",
    response_class=JSONText,
    summary="An entity's versions (as `history --json`)",
    responses=_NOT_FOUND,
)
async def history(
    source: str,
    key: str,
    known_at: str | None = Query(None, description="YYYY-MM-DD or ISO-8601"),
    all: bool = Query(False, description="Include retracted versions."),
    with_gaps: bool = Query(False, description="Interleave the source's gaps."),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    # the cases server/fastpath.py leaves here (`all`, `with_gaps`, errors): the read is
    # blocking I/O, so it runs in one of the entity readers' threads, never on the loop
    read = partial(history_body, led, source, key, known_at, all, with_gaps)
    return JSONText(await in_reader(read))


def history_body(
    led: fl.Ledger, source: str, key: str, known_at: str | None, all: bool, with_gaps: bool
) -> list[dict[str, Any]]:
    """`history --json` of the entity (with `with_gaps`, as `history --with-gaps`)."""
    src = led.source(source)
    known = instant(known_at, src.config.timezone, "known_at")
    k = entity_key(src, key)
    if with_gaps:
        line = src.history_with_gaps(k, known_at=known, include_retracted=all)
        return [
            {"type": "version" if isinstance(i, fl.Version) else "gap", **i.to_json()} for i in line
        ]
    versions = src.history(k, known_at=known, include_retracted=all)
    return [v.to_json() for v in versions]


@router.get(
    "/sources/{source}/entities/{key}/asof",
    response_class=JSONText,
    summary="What an entity was at a valid time (as `asof --json`)",
    responses=_NOT_FOUND,
)
async def asof(
    source: str,
    key: str,
    valid: str = Query(..., description="Valid time: YYYY-MM-DD or ISO-8601"),
    known_at: str | None = Query(None, description="Transaction time"),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    read = partial(asof_body, led, source, key, valid, known_at)
    return JSONText(await in_reader(read))


def asof_body(
    led: fl.Ledger, source: str, key: str, valid: str, known_at: str | None
) -> dict[str, Any]:
    """`asof --json` of the entity at valid time `valid` as known at `known_at`."""
    src = led.source(source)
    tz = src.config.timezone
    when = instant(valid, tz, "valid")
    if when is None:
        raise fl.ConfigError("valid: give a date (YYYY-MM-DD) or an ISO-8601 time")
    answer = src.asof(entity_key(src, key), valid=when, known_at=instant(known_at, tz, "known_at"))
    return answer.to_json()
