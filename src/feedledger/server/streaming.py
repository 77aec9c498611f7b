"""`/api/sources/{source}/snapshot`: the source as it stood at a valid time, streamed
as CSV, JSON lines or (a GIS source) GeoJSON -- chunks of the export as the writer
produces them (`feedledger.api.snapshot_stream`), memory bounded whatever the size."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

import feedledger as fl
from feedledger.api.snapshot_stream import snapshot_bytes
from feedledger.server.deps import instant, ledger

router = APIRouter(prefix="/api", tags=["sources"])

MEDIA = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "geojson": "application/geo+json",
}


@router.get(
    "/sources/{source}/snapshot",
    summary="The source at a valid time, streamed (csv, jsonl, geojson)",
    response_class=StreamingResponse,
)
def snapshot(
    source: str,
    valid: str = Query(..., description="Valid time: YYYY-MM-DD or ISO-8601"),
    known_at: str | None = Query(None, description="Transaction time"),
    format: str = Query("csv", pattern="^(csv|jsonl|geojson)$"),
    led: fl.Ledger = Depends(ledger),
) -> StreamingResponse:
    src = led.source(source)
    tz = src.config.timezone
    when = instant(valid, tz, "valid")
    assert when is not None
    chunks = snapshot_bytes(
        src, valid=when, known_at=instant(known_at, tz, "known_at"), format=format
    )
    name = f"{source}-{valid[:10]}.{format}"
    return StreamingResponse(
        chunks,
        media_type=MEDIA[format],
        headers={"Content-Disposition": f'inline; filename="{name}"'},
    )
