"""`feedledger run SOURCE`: fetch the newest payload from the source's location and
ingest it as a live run (HTTP ETag/Last-Modified are remembered per source)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import now_us
from feedledger.pipeline.context import Context
from feedledger.pipeline.ingest import IngestResult, ingest

if TYPE_CHECKING:
    from feedledger.sources import FetchState


def _state_path(ctx: Context, source: str) -> Path:
    return ctx.workspace.state_dir / "fetch" / f"{source}.json"


def _load_state(path: Path) -> FetchState | None:
    from feedledger.sources import FetchState

    try:
        return FetchState(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def run_source(
    ctx: Context,
    source: str,
    *,
    allow_mass_delete: bool = False,
    now: int | None = None,
) -> IngestResult | None:
    """Fetch and ingest. Returns None when the publisher has nothing new (HTTP 304).
    `now`: the caller's clock (the scheduler's), for a `{date}` location's newest date."""
    src = ctx.workspace.source(source)
    if not src.fetch:
        raise ConfigError(
            "this source has no fetch location",
            source=source,
            hint="declare one with `feedledger source add ... --fetch DIR_OR_URL "
            "--replace`, or use `feedledger ingest SOURCE FILE`",
        )
    from feedledger.sources import FetchState, fetch

    path = _state_path(ctx, source)
    fetched_at = now_us()
    got = fetch(src, previous=_load_state(path), now_us=now)
    if got.data is None:
        return None
    # hand ingest the only reference to the bytes, so that it can free them once they
    # are archived and parsed (`got` keeps just what is known about them)
    box, got = [got.data], replace(got, data=None)
    result = ingest(
        ctx,
        source,
        box.pop(),
        published_at=got.published_at,
        original_name=got.original_name,
        content_type=got.content_type,
        allow_mass_delete=allow_mass_delete,
        fetched_at=fetched_at,
    )
    if got.etag or got.last_modified:
        path.parent.mkdir(parents=True, exist_ok=True)
        state = FetchState(etag=got.etag, last_modified=got.last_modified, url=src.fetch)
        path.write_text(json.dumps(asdict(state)), encoding="utf-8")
    return result
