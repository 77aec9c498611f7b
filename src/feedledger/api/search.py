"""`Destination.search(query)`: a tantivy destination's documents matching a query,
ranked by BM25 (sync/kinds/tantivy_search.py) -- what `feedledger search` prints and
`GET /api/destinations/{name}/search` answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feedledger.model.destination import Destination as Declared


@dataclass(frozen=True)
class SearchHit:
    key: list[Any]  # the record's key values
    score: float  # BM25
    doc: dict[str, Any] | None  # the document the destination holds

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "score": self.score, "doc": self.doc}


@dataclass(frozen=True)
class SearchResults:
    destination: str
    query: str
    total: int  # documents matching, of which `hits` are the best `limit`
    hits: tuple[SearchHit, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "query": self.query,
            "total": self.total,
            "hits": [h.to_json() for h in self.hits],
        }


def search(declared: Declared, query: str, limit: int = 10) -> SearchResults:
    from feedledger.sync.kinds.tantivy_search import search as run  # lazy: the search extra

    found = run(declared, query, limit)
    hits = tuple(SearchHit(h["key"], h["score"], h["doc"]) for h in found["hits"])
    return SearchResults(declared.name, query, found["total"], hits)
