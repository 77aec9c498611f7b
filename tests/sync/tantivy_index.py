"""A tantivy destination as its users see it, read with tantivy itself (not feedledger's
code): the present documents (`fl_deleted` 0) with their stored JSON and geometry, and a
document removed behind feedledger's back."""

from __future__ import annotations

import json
from typing import Any

import shapely
import tantivy


def _open(path: str) -> Any:
    index = tantivy.Index.open(path)
    index.reload()
    return index


def stored(path: str, deleted: int | None = 0) -> list[dict[str, list[Any]]]:
    """Every stored document (only present ones by default; None: tombstones too)."""
    index = _open(path)
    searcher = index.searcher()
    if searcher.num_docs == 0:
        return []
    query = (
        tantivy.Query.all_query()
        if deleted is None
        else tantivy.Query.term_query(index.schema, "fl_deleted", deleted)
    )
    hits = searcher.search(query, limit=searcher.num_docs).hits
    return [searcher.doc(a).to_dict() for _s, a in hits]


def features(path: str, key: str) -> dict[str, tuple[dict[str, Any], Any]]:
    out = {}
    for doc in stored(path):
        body = json.loads(bytes(doc["fl_doc"][0]))
        body.pop("geometry", None)
        wkb = doc.get("fl_wkb")
        out[str(body[key])] = (body, shapely.from_wkb(bytes(wkb[0])) if wkb else None)
    return out


def remove(path: str, key: str) -> None:
    """Delete the key's document (a term delete: `fl_key` is stored with `raw`)."""
    index = tantivy.Index.open(path)
    writer = index.writer(num_threads=1)
    try:
        writer.delete_documents_by_term("fl_key", key)
        writer.commit()
    finally:
        writer.wait_merging_threads()
