"""Searching a tantivy destination (`feedledger search NAME "query"`, the HTTP API's
`/api/destinations/{name}/search`): tantivy's query language (words, `field:word`,
`"a phrase"`, AND / OR / NOT, `+must -not`; words with an apostrophe, as names have, read
as the lenient parser reads them) parsed against the destination's text
fields (or `fl_text`, every string member, when none was declared), ranked by BM25,
tombstones left out. A read opens the index's last commit: it takes no lock and never
waits for a writer; the index is kept open between searches (per folder) and
reloaded to the last commit before each one.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError, StoreUnavailableError
from feedledger.sync.kinds.tantivy_schema import ALL_TEXT, one_line

MAX_LIMIT = 1000
_open: dict[str, Any] = {}  # folder -> its Index, opened once per process
_lock = threading.Lock()


def _index(path: Path) -> Any:
    import tantivy  # lazy: the `search` extra

    with _lock:
        index = _open.get(str(path))
        if index is None:
            if not (path / "meta.json").exists():
                raise StoreUnavailableError(
                    f"tantivy index {path} is not there (no meta.json)",
                    hint="`destination add` creates it; was the folder moved or removed?",
                )
            try:
                index = tantivy.Index.open(str(path))
                index.config_reader("Manual")
            except (OSError, ValueError) as exc:
                raise StoreUnavailableError(
                    f"cannot open tantivy index {path}: {one_line(exc)}"
                ) from None
            _open[str(path)] = index
    return index


def search(dest: Destination, query: str, limit: int = 10) -> dict[str, Any]:
    """The present documents matching `query`, best first: {"total", "hits": [{"key",
    "score", "doc"}]} (key: the record's key values; doc: its stored document)."""
    import tantivy  # lazy: the `search` extra

    if dest.kind != "tantivy":
        raise ConfigError(
            f"destination {dest.name} is a {dest.kind} destination, not a tantivy index",
            hint="search reads destinations declared with --tantivy DIR",
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"--limit must be between 1 and {MAX_LIMIT}, not {limit}")
    if not query.strip():
        raise ConfigError("the query is empty", hint='give words, or field:word, or "a phrase"')
    index = _index(Path(dest.url))
    fields = list(dest.text_fields) or [ALL_TEXT]
    parsed = _parse(index, query, fields)
    tombstone = tantivy.Query.term_query(index.schema, "fl_deleted", 1)
    present = tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, parsed), (tantivy.Occur.MustNot, tombstone)]
    )
    try:
        index.reload()
        searcher = index.searcher()
        found = searcher.search(present, limit=limit, count=True)
        hits = []
        for score, addr in found.hits:
            stored = searcher.doc(addr)
            doc = stored.get_first("fl_doc")
            hits.append({
                "key": json.loads(str(stored.get_first("fl_key"))),
                "score": round(float(score), 6),
                "doc": None if doc is None else json.loads(bytes(doc)),
            })  # fmt: skip
    except (OSError, ValueError, RuntimeError) as exc:
        raise StoreUnavailableError(
            f"destination {dest.name}: cannot search tantivy index {dest.url}: {one_line(exc)}"
        ) from None
    return {"total": int(found.count or 0), "hits": hits}


def _parse(index: Any, query: str, fields: list[str]) -> Any:
    """`query` in tantivy's query language; words the strict parser refuses though its
    lenient one reads them without an error (a name with an apostrophe: o'brien, a
    dangling AND) are searched as the lenient parser reads them. A query whose mistake
    both see (an unknown field, an unclosed parenthesis) is refused in one line."""
    try:
        return index.parse_query(query, fields)
    except ValueError as exc:
        strict = exc
    try:
        parsed, errors = index.parse_query_lenient(query, fields)
    except ValueError:
        errors = [strict]
    if not errors:
        return parsed
    raise ConfigError(
        f"bad query {query!r}: {one_line(strict)}",
        hint=f'words, field:word (fields: {", ".join(fields)}), "a phrase", AND, OR, NOT',
    ) from None
