"""`feedledger demo`: build a demo workspace and show what the ledger knows."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

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
    from feedledger.api.demo import MOVED, PARCEL, SOURCE, ZONING, build_demo
    from feedledger.api.ledger import open as open_ledger
    from feedledger.cli.demo_zoning import show_zoning

    result = build_demo(directory, store=store)
    table(
        "ingested payloads (one live run each)",
        ["file", "published_at", "added", "changed", "deleted", "run_id"],
        [
            [
                f.name,
                when(r.published_at),
                r.to_json().get("added"),
                r.to_json().get("changed"),
                r.to_json().get("deleted"),
                r.run_id[:8] if r.run_id else "",
            ]
            for f, r in zip(result.files, result.results, strict=True)
        ],
    )
    with open_ledger(result.workspace / "feedledger.toml") as led:
        src = led.source(SOURCE)
        versions = src.history(PARCEL)
        table(
            f"history of parcel {PARCEL}: valid time from the publisher, "
            "recorded_at from the commit",
            ["valid_from", "valid_to", "recorded_at", "change", "zoning"],
            [
                [
                    when(v.valid_from),
                    when(v.valid_to),
                    when(v.recorded_at),
                    v.change.value,
                    _zoning(v.attributes),
                ]
                for v in versions
            ],
        )
        rows = []
        for day in ("2026-08-04", "2026-08-08", "2026-08-14", "2026-08-20"):
            ans = src.asof(PARCEL, valid=date.fromisoformat(day))
            v = ans.version
            rows.append([day, ans.status.value, _zoning(v.attributes if v else None)])
        for day in ("2026-08-01", "2026-08-12", "2026-08-20"):
            ans = src.asof("0902-33-4", valid=date.fromisoformat(day))
            version = ans.version
            rows.append(
                [
                    f"{day} (0902-33-4)",
                    ans.status.value,
                    _zoning(version.attributes) if version else "(not yet published)",
                ]
            )
        table("as-of answers", ["valid date", "status", "zoning"], rows)
    show_zoning(result)
    ws = result.workspace
    exe = _exe()
    out.print(
        f"\nDemo workspace: {ws}\nTry next:\n"
        f"  cd {ws}\n"
        f"  {exe} history {SOURCE} {PARCEL} --json\n"
        f"  {exe} asof {SOURCE} {PARCEL} --valid 2026-08-08 --known-at 2026-08-01\n"
        f"  {exe} runs {SOURCE}\n"
        f"  {exe} snapshot {SOURCE} --valid 2026-08-12\n"
        f"  {exe} archive list {SOURCE}\n"
        f"  {exe} verify {SOURCE}\n"
        f"  {exe} history {ZONING} {MOVED} --json      # each version's geometry as GeoJSON\n"
        f"  {exe} runs {ZONING}\n"
        f"\nThe dashboard (HTTP API and pages, on 127.0.0.1:8765; Ctrl-C stops it):\n"
        f"  {exe} --config {ws / 'feedledger.toml'} serve\n"
        f"  then open http://127.0.0.1:8765/sources/{SOURCE}/entities/{PARCEL}",
        soft_wrap=True,
    )


def _exe() -> str:
    """`feedledger` if it is on PATH, else the full path of this installation's script."""
    import shutil
    import sys

    if shutil.which("feedledger"):
        return "feedledger"
    candidate = Path(sys.executable).parent / "feedledger"
    return str(candidate) if candidate.exists() else "feedledger"


def _zoning(attrs: dict[str, Any] | None) -> str:
    if attrs is None:
        return "(deleted)"
    return str(attrs.get("zoning", ""))
