"""Declaring destinations: checked (source, table, transform, generation) and reached
(its table created, or an existing one checked) before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from feedledger.context import Context
from feedledger.formats.keys import key_candidates
from feedledger.model.destination import (
    Destination,
    Kind,
    check_fields,
    check_table,
    generation_rank,
    is_deletion,
)
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import check_name
from feedledger.model.timeutil import iso, now_us
from feedledger.sync import manifests, registry
from feedledger.sync import state as sync_state
from feedledger.sync.kinds import open_target
from feedledger.sync.transform import load


def add_destination(
    ctx: Context,
    name: str,
    *,
    source: str,
    postgres: str | None,
    sqlite: str | None,
    table: str | None,
    text_fields: str | None,
    transform: str | None,
    generation: str,
    gpkg: str | None = None,
    layer: str | None = None,
    tantivy: str | None = None,
    postgis: str | None = None,
    srid: int | None = None,
) -> Destination:
    check_name(name, "destination")
    ctx.workspace.source(source)
    places = (
        ("postgres", postgres),
        ("sqlite", sqlite),
        ("gpkg", gpkg),
        ("tantivy", tantivy),
        ("postgis", postgis),
    )
    given = [k for k, v in places if v]
    if len(given) != 1:
        raise ConfigError(
            "give exactly one of --postgres URL, --sqlite PATH, --gpkg FILE, --tantivy DIR "
            "or --postgis URL"
            + (f" (got {' and '.join('--' + g for g in given)})" if given else "")
        )
    kind: Kind = given[0]  # type: ignore[assignment]
    for option, value in (("postgres", postgres), ("postgis", postgis)):
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"--{option} must be a postgresql:// URL, not {value!r}")
    if srid is not None and (kind != "postgis" or srid < 0):
        raise ConfigError(
            "--srid N is a PostGIS destination's (--postgis URL), N >= 0"
            if kind != "postgis"
            else f"--srid must be a spatial reference id >= 0, not {srid}"
        )
    if kind == "gpkg":
        if table is not None:
            raise ConfigError("a GeoPackage destination takes --layer NAME, not --table")
        if not layer:
            raise ConfigError("a GeoPackage destination needs --layer NAME (its feature layer)")
        table = layer
    elif layer is not None:
        raise ConfigError("--layer is a GeoPackage destination's (--gpkg FILE); use --table")
    if kind == "tantivy":
        if table is not None:
            raise ConfigError("a tantivy destination is its folder: it takes no --table")
        table = tantivy_documents(text_fields)
    if not table:
        raise ConfigError(f"a {kind} destination needs --table NAME")
    path = sqlite or gpkg or tantivy or ""
    url = (postgres or postgis or "") if kind in ("postgres", "postgis") else ""
    url = url or str(Path(path).expanduser().resolve())
    if kind in ("gpkg", "tantivy"):  # one destination per file or folder: its writer's lock
        for other in registry.listing(ctx.store):
            if other.kind == kind and other.url == url:
                raise ConfigError(
                    f"{url} is already the {'file' if kind == 'gpkg' else 'index'} of "
                    f"destination {other.name}",
                    hint="give each GeoPackage destination its own --gpkg file"
                    if kind == "gpkg"
                    else "give each tantivy destination its own --tantivy folder",
                )
    generation_rank(generation)
    load(transform)  # fails now, not at the first write
    dest = Destination(
        name=name,
        source=source,
        kind=kind,
        url=url,
        table=check_table(table),
        text_fields=check_fields(tuple(f.strip() for f in (text_fields or "").split(",") if f)),
        transform=transform,
        generation=generation,
        created_at=now_us(),
    )
    src = ctx.workspace.source(source)
    target = open_target(dest, geo=src.is_geo, store=ctx.store, key=src.key, srid=srid)
    try:
        target.ensure()
    finally:
        target.close()
    registry.add(ctx.store, dest)  # with its live cursor at the source's newest change
    return dest


def tantivy_documents(text_fields: str | None) -> str:
    """A tantivy destination's `table`: the name of its documents; its text fields
    checked as index fields first."""
    from feedledger.sync.kinds.tantivy_schema import (  # lazy: a tantivy destination only
        DEFAULT_TABLE,
        check_text_fields,
    )

    check_text_fields(tuple(f.strip() for f in (text_fields or "").split(",") if f))
    return DEFAULT_TABLE


def explain(ctx: Context, name: str, key: str) -> dict[str, Any]:
    """Why a destination holds what it holds for one key: the row held now, and every
    scope's latest guard verdict (the live route, each manifest rebuild), newest first,
    with the incoming revision, generation and content hash, the reason and when."""
    dest = registry.get(ctx.store, name)
    src = ctx.workspace.source(dest.source)
    candidates = key_candidates(src, key)
    found = sync_state.verdicts_for(ctx.store, dest.name, candidates)
    target = open_target(dest, geo=src.is_geo, store=ctx.store, key=src.key)
    try:
        target.ensure()
        row = target.held([f["key"] for f in found] + candidates)
    finally:
        target.close()
    if row is None and not found:
        raise NotFoundError(
            f"destination {dest.name} holds no row and no sync recorded a verdict for key {key!r}",
            source=dest.source,
            hint="its live route writes keys changed since it was added; a rebuild "
            "(`sync --manifest`) writes the rest",
        )
    names = {m.manifest_id: m.name for m in manifests.listing(ctx.store)}
    verdicts = [
        {
            "scope": "live" if f["scope"] == "live" else "manifest",
            "manifest": None if f["scope"] == "live" else names.get(f["scope"], f["scope"]),
            "verdict": f["verdict"],
            "reason": f["reason"] or _why(f),
            "incoming": {
                "revision": f["revision"],
                "generation": f["generation"],
                "content_hash": f["content_hash"],
            },
            "evidence": f["evidence"],
            "attempts": f["attempts"],
            "at": iso(f["at"]),
        }
        for f in found
    ]
    held = None
    if row is not None:
        _k, revision, generation, _rank, deleted, chash, written_at = row
        held = {
            "revision": int(revision),
            "generation": generation,
            "content_hash": chash,
            "deleted": bool(deleted),
            "written_at": iso(int(written_at)) if written_at is not None else None,
        }
    return {
        "destination": dest.name,
        "source": dest.source,
        "key": json.loads(row[0] if row is not None else found[0]["key"]),
        "held": held,
        "last": verdicts[0] if verdicts else None,
        "verdicts": verdicts,
    }


_ACCEPTED_WHY = {
    "accepted": "newer source revision, or same revision with a newer transform generation",
    "already_current": "same revision, generation and content as held: not written",
}


def _why(f: dict[str, Any]) -> str | None:
    """The reason of a verdict the guard gave none for (it wrote, or had nothing to do)."""
    if f["verdict"] == "accepted" and is_deletion(True, f["content_hash"]):
        return (
            f"a deletion after revision {f['revision']}: it wins over the state it deletes, "
            "even at the same revision; only a newer revision brings the record back"
        )
    return _ACCEPTED_WHY.get(f["verdict"])
