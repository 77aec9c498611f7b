"""Declaring destinations: checked (source, table, transform, generation) and reached
(its table created, or an existing one checked) before anything is stored."""

from __future__ import annotations

from pathlib import Path

from feedledger.ledger import destinations as registry
from feedledger.model.destination import Destination, check_fields, check_table, generation_rank
from feedledger.model.errors import ConfigError
from feedledger.model.source import check_name
from feedledger.model.timeutil import now_us
from feedledger.pipeline.context import Context
from feedledger.sync.target import Target
from feedledger.sync.transform import load


def add_destination(
    ctx: Context,
    name: str,
    *,
    source: str,
    postgres: str | None,
    sqlite: str | None,
    table: str,
    text_fields: str | None,
    transform: str | None,
    generation: str,
) -> Destination:
    check_name(name, "destination")
    ctx.workspace.source(source)
    if (postgres is None) == (sqlite is None):
        raise ConfigError("give exactly one of --postgres URL or --sqlite PATH")
    if postgres is not None and not postgres.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"--postgres must be a postgresql:// URL, not {postgres!r}")
    url = postgres if postgres is not None else str(Path(sqlite or "").expanduser().resolve())
    generation_rank(generation)
    load(transform)  # fails now, not at the first write
    dest = Destination(
        name=name,
        source=source,
        kind="postgres" if postgres is not None else "sqlite",
        url=url,
        table=check_table(table),
        text_fields=check_fields(tuple(f.strip() for f in (text_fields or "").split(",") if f)),
        transform=transform,
        generation=generation,
        created_at=now_us(),
    )
    target = Target(dest)
    try:
        target.ensure()
    finally:
        target.close()
    registry.add(ctx.store, dest)  # with its live cursor at the source's newest change
    return dest
