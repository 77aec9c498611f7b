"""Entity commands: `history` (optionally with gaps) and `asof`."""

from __future__ import annotations

from typing import Any

import typer

from feedledger.cli.common import JSON_OPT, context, emit_json, guarded, out, show, table, when
from feedledger.model.timeutil import iso


def register(app: typer.Typer) -> None:
    @app.command("history")
    @guarded
    def history_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        key: str = typer.Argument(..., help="Key value; compound keys as a JSON array."),
        all_: bool = typer.Option(False, "--all", help="Include retracted versions."),
        known_at: str | None = typer.Option(
            None, "--known-at", help="As the ledger believed at this time."
        ),
        with_gaps: bool = typer.Option(
            False,
            "--with-gaps",
            help="Also show the source's gaps (stretches not observed) between versions; "
            'JSON items then carry "type": "version" or "gap".',
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Versions of one entity in valid-time order (valid_to derived)."""
        from feedledger.pipeline import query

        if with_gaps:
            with context(ctx) as c:
                items = query.history_with_gaps(
                    c, source, key, include_retracted=all_, known_at=known_at
                )
            if json_out:
                emit_json(items)
                return
            table(
                f"{source} {key} (with gaps)",
                ["from", "to", "recorded_at", "what", "run_id"],
                [_timeline_row(i) for i in items],
                fold=True,
            )
            return
        with context(ctx) as c:
            versions = query.history(c, source, key, include_retracted=all_, known_at=known_at)
        if json_out:
            emit_json(versions)
            return
        table(
            f"{source} {key}",
            [
                "valid_from",
                "valid_to",
                "recorded_at",
                "change",
                "attributes",
                "run_id",
                "backfill",
                "retracted_at",
            ],
            [
                [
                    when(v.valid_from),
                    when(v.valid_to),
                    when(v.recorded_at),
                    v.change,
                    v.attributes or "(deleted)",
                    v.run_id[:8],
                    v.backfill,
                    when(v.retracted_at),
                ]
                for v in versions
            ],
            fold=True,  # the attribute JSON is shown whole, wrapped, never cut
        )

    @app.command("asof")
    @guarded
    def asof_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        key: str = typer.Argument(...),
        valid: str = typer.Option(..., "--valid", help="Valid time: what was true then?"),
        known_at: str | None = typer.Option(
            None, "--known-at", help="Transaction time: as believed then."
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """What was KEY at valid time D (optionally as known at TS)?
        present|absent|not_observed|not_known."""
        from feedledger.pipeline import query

        with context(ctx) as c:
            answer = query.asof(c, source, key, valid=valid, known_at=known_at)
        if json_out:
            emit_json(answer)
            return
        v = answer["version"]
        detail = (
            (
                f" since {iso(v.valid_from)} (recorded {iso(v.recorded_at)}): "
                f"{v.attributes or '(deleted)'}"
            )
            if v
            else ""
        )
        if answer["status"] == "not_observed":
            gap = answer["gap"]
            last, nxt = answer["last_observed"], answer["next_observed"]
            detail = (
                f" (inside a gap {iso(gap.start_at)} .. {iso(gap.end_at)}: {gap.reason}); "
                f"last observed: {_seen(last)}; next observed: "
                + (
                    f"{_seen(nxt)} (payload of {answer['next_observed_at']})"
                    if answer["next_observed_at"]
                    else "nothing yet"
                )
            )
        elif answer["status"] == "not_known":
            first = answer["first_recorded_at"]
            detail = f" (nothing of {source} was recorded " + (
                f"before {first})" if first else "yet)"
            )
        out.print(f"{source} {key} at {valid}: {answer['status']}{detail}")


def _seen(v: Any) -> str:
    if v is None:
        return "nothing"
    state = v.attributes if v.attributes is not None else "(deleted)"
    return f"{state} from {iso(v.valid_from)}"


def _timeline_row(item: dict[str, Any]) -> list[Any]:
    """One line of `history --with-gaps` for humans (timestamps as ISO text)."""
    if item["type"] == "gap":
        return [
            item["start"],
            item["end"],
            item["recorded_at"],
            f"NOT OBSERVED: {item['reason']}",
            item["run_id"][:8],
        ]
    attrs = item["attributes"]
    return [
        item["valid_from"],
        item["valid_to"] or "",
        item["recorded_at"],
        show(attrs) if attrs is not None else "(deleted)",
        item["run_id"][:8],
    ]
