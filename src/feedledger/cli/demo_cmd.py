"""`feedledger demo`: build a demo workspace and show what the ledger knows."""

from __future__ import annotations

from pathlib import Path

import typer

from feedledger.cli.common import guarded, out, table, when


def register(app: typer.Typer) -> None:
    @app.command("demo")
    @guarded
    def demo(
        directory: Path = typer.Option(
            Path("demo-workspace"), "--dir", help="Folder for the demo workspace (recreated)."
        ),
        store: str | None = typer.Option(None, "--store", help="Store URL (default SQLite)."),
    ) -> None:
        """Build a demo workspace with a synthetic county feed, ingest it and show a
        parcel's bitemporal history and as-of answers."""
        from feedledger.config import Workspace
        from feedledger.context import Context
        from feedledger.pipeline import query
        from feedledger.pipeline.demo import PARCEL, SOURCE, build_demo

        result = build_demo(directory, store_url=store)
        table(
            "ingested payloads (one live run each)",
            ["file", "published_at", "added", "changed", "deleted", "run_id"],
            [
                [
                    f.name,
                    when(r.payload.published_at),
                    r.counts.get("added"),
                    r.counts.get("changed"),
                    r.counts.get("deleted"),
                    r.run_id[:8] if r.run_id else "",
                ]
                for f, r in zip(result.files, result.results, strict=True)
            ],
        )
        with Context(Workspace.load(result.workspace / "feedledger.toml")) as ctx:
            versions = query.history(ctx, SOURCE, PARCEL, include_retracted=False, known_at=None)
            table(
                f"history of parcel {PARCEL}: valid time from the publisher, "
                "recorded_at from the commit",
                ["valid_from", "valid_to", "recorded_at", "change", "zoning"],
                [
                    [
                        when(v.valid_from),
                        when(v.valid_to),
                        when(v.recorded_at),
                        v.change,
                        _zoning(v.attributes),
                    ]
                    for v in versions
                ],
            )
            rows = []
            for day in ("2026-08-04", "2026-08-08", "2026-08-14", "2026-08-20"):
                ans = query.asof(ctx, SOURCE, PARCEL, valid=day, known_at=None)
                v = ans["version"]
                rows.append([day, ans["status"], _zoning(v.attributes if v else None)])
            for day in ("2026-08-01", "2026-08-12", "2026-08-20"):
                ans = query.asof(ctx, SOURCE, "0902-33-4", valid=day, known_at=None)
                version = ans["version"]
                rows.append(
                    [
                        f"{day} (0902-33-4)",
                        ans["status"],
                        _zoning(version.attributes) if version else "(not yet published)",
                    ]
                )
            table("as-of answers", ["valid date", "status", "zoning"], rows)
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
            f"  {exe} verify {SOURCE}"
        )


def _exe() -> str:
    """`feedledger` if it is on PATH, else the full path of this installation's script."""
    import shutil
    import sys

    if shutil.which("feedledger"):
        return "feedledger"
    candidate = Path(sys.executable).parent / "feedledger"
    return str(candidate) if candidate.exists() else "feedledger"


def _zoning(attrs: str | None) -> str:
    if attrs is None:
        return "(deleted)"
    import json

    return str(json.loads(attrs).get("zoning", ""))
