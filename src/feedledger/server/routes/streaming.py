"""`/api/sources/{source}/snapshot`: the source as it stood at a valid time, streamed
as CSV, JSON lines or (a GIS source) GeoJSON -- chunks of the export as the writer
produces them (`feedledger.api.snapshot_stream`), memory bounded whatever the size.
Inside a standing gap the answer carries `Feedledger-Gap: <start>/<end>`; `?strict=1`
refuses it (409, a problem document naming the gap)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

import feedledger as fl
from feedledger.api.errors import InGap, gap_text
from feedledger.server.deps import instant, ledger

router = APIRouter(prefix="/api", tags=["sources"])

MEDIA = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "geojson": "application/geo+json",
}


GAP_HEADER = "Feedledger-Gap"

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The snapshot, streamed. Inside a standing gap (a stretch the "
        "source was not observed) the rows are the state as last observed and the answer "
        f"carries `{GAP_HEADER}`.",
        "headers": {
            GAP_HEADER: {
                "description": "Only when `valid` falls in a standing gap: the gap as an "
                "ISO-8601 interval `<start>/<end>` (end exclusive).",
                "schema": {"type": "string"},
            }
        },
    },
    409: {
        "description": "`strict` and `valid` falls in a standing gap: a problem document "
        "(type `urn:feedledger:problem:in-gap`) naming the gap; nothing is streamed.",
        "content": {"application/problem+json": {}},
    },
}


@router.get(
    "/sources/{source}/snapshot",
    summary="The source at a valid time, streamed (csv, jsonl, geojson)",
    response_class=StreamingResponse,
    responses=_RESPONSES,
)
def snapshot(
    source: str,
    valid: str = Query(..., description="Valid time: YYYY-MM-DD or ISO-8601"),
    known_at: str | None = Query(None, description="Transaction time"),
    format: str = Query("csv", pattern="^(csv|jsonl|geojson)$"),
    strict: bool = Query(
        False,
        description="Refuse (409, a problem naming the gap) when `valid` falls in a "
        "standing gap, instead of answering the state as last observed.",
    ),
    led: fl.Ledger = Depends(ledger),
) -> StreamingResponse:
    src = led.source(source)
    tz = src.config.timezone
    when = instant(valid, tz, "valid")
    assert when is not None
    known = instant(known_at, tz, "known_at")
    headers = {}
    inside = src.snapshot_gap(valid=when, known_at=known)
    if inside is not None:
        text = gap_text(source, valid, inside)
        if strict:
            raise InGap(text + "; nothing streamed", inside, source=source)
        headers[GAP_HEADER] = f"{inside.gap.start.isoformat()}/{inside.gap.end.isoformat()}"
    chunks = src.snapshot_bytes(valid=when, known_at=known, format=format)
    name = f"{source}-{valid[:10]}.{format}"
    return StreamingResponse(
        chunks,
        media_type=MEDIA[format],
        headers={"Content-Disposition": f'inline; filename="{name}"', **headers},
    )
