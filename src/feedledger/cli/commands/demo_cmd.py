"""`feedledger demo`: build a demo workspace and show what the ledger knows. The demo
itself (its workspace, FeatureServer and what it shows) is the face in feedledger.demo;
this command parses its options and renders its tables and texts."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer

from feedledger.cli.common import out, table, when


def demo(
    directory: Path = typer.Option(
        Path("demo-workspace"), "--dir", help="Folder for the demo workspace (recreated)."
    ),
    store: str | None = typer.Option(None, "--store", help="Store URL (default SQLite)."),
) -> None:
    """Build a demo workspace with a synthetic county feed, ingest it and show a
    parcel's bitemporal history and as-of answers; then fetch a zoning layer from a
    FeatureServer served on 127.0.0.1 for the demo and show a parcel's geometry change."""
    # the demo (and the API under it) is imported when the command runs, not at start-up
    from feedledger.demo import build_demo  # lazy: see above
    from feedledger.demo.report import Table, report  # lazy: see above

    for item in report(build_demo(directory, store=store)):
        if isinstance(item, Table):
            rows = [[when(c) if isinstance(c, datetime) else c for c in r] for r in item.rows]
            table(item.title, item.columns, rows)
        else:
            out.print(item, soft_wrap=True)
