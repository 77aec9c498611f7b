"""`feedledger search NAME "query"`: a tantivy destination's documents matching a
query, best first (BM25), through the public API (`Destination.search`)."""

from __future__ import annotations

import json

import typer

from feedledger.cli.common import JSON_OPT, emit_json, ledger, out, table


def search_cmd(
    ctx: typer.Context,
    destination: str = typer.Argument(..., help="A tantivy destination (--tantivy DIR)."),
    query: str = typer.Argument(
        ...,
        help="tantivy's query language: words (any of them), field:word (a --text-fields "
        'field), "a phrase", AND / OR / NOT, +must -mustnot.',
    ),
    limit: int = typer.Option(10, "--limit", help="Hits shown, best first (1-1000)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Search a tantivy destination: its present documents matching QUERY, ranked by
    BM25 (deleted records never match). Reads the index's last commit, never waiting
    for a sync that is writing it.

    Examples: `search parcels "main street"`, `search parcels "zone:r1 AND owner:smith"`,
    `search parcels '"oak avenue"' --limit 50 --json`."""
    with ledger(ctx) as led:
        found = led.destination(destination).search(query, limit=limit)
    if json_out:
        emit_json(found.to_json())
        return
    rows = [
        [json.dumps(h.key, ensure_ascii=False), f"{h.score:.3f}", _brief(h.doc)] for h in found.hits
    ]
    table(f"{found.destination}: {found.total} matching", ["key", "score", "document"], rows)
    if found.total > len(found.hits):
        out.print(f"(best {len(found.hits)} of {found.total}; --limit N for more)")


def _brief(doc: object, width: int = 100) -> str:
    text = json.dumps(doc, ensure_ascii=False) if doc is not None else ""
    return text if len(text) <= width else text[: width - 1] + "…"
