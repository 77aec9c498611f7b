"""Read endpoints of destinations: `/api/destinations` (the declarations),
`/api/destinations/{name}` (outcomes, unresolved records with evidence, live lag,
rebuild progress) and `/api/destinations/{name}/keys/{key}` (the guard's reason,
as `sync-explain --json`), `/api/destinations/{name}/search?q=&limit=` (a tantivy
destination's documents matching a query, BM25-ranked: as `search --json`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

import feedledger as fl
from feedledger.server.deps import JSONText, ledger

router = APIRouter(prefix="/api", tags=["destinations"])


@router.get("/destinations", response_class=JSONText, summary="Declared destinations")
def destinations(led: fl.Ledger = Depends(ledger)) -> JSONText:
    return JSONText([d.to_json() for d in led.destinations()])


@router.get("/destinations/{name}", response_class=JSONText, summary="One destination")
def destination(name: str, led: fl.Ledger = Depends(ledger)) -> JSONText:
    return JSONText(led.destination(name).status().to_json())


@router.get(
    "/destinations/{name}/keys/{key}",
    response_class=JSONText,
    summary="Why a key is what it is there (as `sync-explain --json`)",
)
def explain(name: str, key: str, led: fl.Ledger = Depends(ledger)) -> JSONText:
    return JSONText(led.destination(name).explain(key).to_json())


@router.get(
    "/destinations/{name}/search",
    response_class=JSONText,
    summary="Search a tantivy destination (as `search --json`)",
)
def search(
    name: str,
    q: str = Query(..., description='tantivy query: words, field:word, "a phrase", AND/OR/NOT'),
    limit: int = Query(10, ge=1, le=1000),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    return JSONText(led.destination(name).search(q, limit=limit).to_json())
