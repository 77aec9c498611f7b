"""Archive-level operations: add a payload without applying it, rebuild the index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from feedledger import faults
from feedledger.model.errors import AmbiguousPayloadError, ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import now_us
from feedledger.pipeline.context import Context
from feedledger.pipeline.ingest import _keep_rejected, resolve_published_at


def archive_add(
    ctx: Context,
    source: str,
    data: bytes,
    *,
    published_at: str | int | None,
    original_name: str | None,
    content_type: str | None = None,
    allow_future: bool = False,
) -> tuple[PayloadRef, bool]:
    """Archive bytes (write-once, fsynced) and index them. Returns (ref, created).
    A publisher date more than a day after now is refused unless `allow_future`."""
    src = ctx.workspace.source(source)
    fetched_at = now_us()
    try:
        when = resolve_published_at(
            src, published_at, original_name, now=fetched_at, allow_future=allow_future
        )
    except ConfigError as exc:
        kept = _keep_rejected(ctx, source, data, original_name, str(exc))
        raise ConfigError(f"{exc.problem}; {kept}", source=source, payload=original_name) from None
    if when is None:
        kept = _keep_rejected(ctx, source, data, original_name, "no publisher date")
        raise ConfigError(
            f"no publisher date: pass --published-at DATE; {kept}",
            source=source,
            payload=original_name,
        )
    ref, created = ctx.archive.put(
        src.name,
        data,
        published_at=when,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=content_type,
    )
    faults.point("after_archive")
    ctx.store.register_payload(ref)
    return ref, created


@dataclass
class ReindexResult:
    scanned: int = 0
    added: int = 0
    present: int = 0
    ambiguous: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "added": self.added,
            "present": self.present,
            "ambiguous": self.ambiguous,
        }


def reindex(ctx: Context) -> ReindexResult:
    """Rebuild the payload index from the archive folder alone (idempotent)."""
    result = ReindexResult()
    for ref in ctx.archive.scan():
        result.scanned += 1
        try:
            if ctx.store.register_payload(ref):
                result.added += 1
            else:
                result.present += 1
        except AmbiguousPayloadError as exc:
            result.ambiguous.append(
                {"payload_id": ref.payload_id, "source": ref.source, "problem": str(exc)}
            )
    return result
