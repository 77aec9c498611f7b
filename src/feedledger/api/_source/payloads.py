"""A payload handed to `Source.ingest` / `Source.archive_add`: a file's bytes, its content
type guessed from its name, the live run that applies it (or its archiving alone), and
what `Source.run` made of the publications waiting, typed."""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path
from typing import Any

from feedledger.api.results import Ingested, NothingToDo, NotModified, Payload, Recovered, WindowRun
from feedledger.context import Context
from feedledger.model.errors import NotFoundError
from feedledger.pipeline.intake.archiving import archive_add
from feedledger.pipeline.intake.ingest import ingest as apply


def content_type(name: str) -> str | None:
    known = {".jsonl": "application/x-ndjson", ".parquet": "application/vnd.apache.parquet"}
    return known.get(Path(name).suffix.lower()) or mimetypes.guess_type(name)[0]


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise NotFoundError(f"cannot read {path}: {exc.strerror}") from None


def ingest(
    ctx: Context,
    source: str,
    payload: str | os.PathLike[str] | bytes,
    *,
    published_at: int | str | None,
    name: str | None,
    content_type_: str | None,
    allow_mass_delete: bool,
    allow_future: bool,
) -> Ingested:
    """`Source.ingest` (a source not declared: its bytes are kept in the archive for
    inspection, as are a bad date's)."""

    if not isinstance(payload, bytes):
        # a file: read from the archive's copy of it, never held whole, when its source
        # reads it in batches; else its bytes (pipeline/intake/ingest_file.py)
        path = Path(payload)
        name = name or path.name
        from feedledger.pipeline.intake.ingest_file import ingest_file  # lazy: the archive

        return Ingested.of(
            ingest_file(
                ctx,
                source,
                path,
                lambda: read(path),
                published_at=published_at,
                original_name=name,
                content_type=content_type_ or content_type(name),
                allow_mass_delete=allow_mass_delete,
                allow_future=allow_future,
            )
        )
    result = apply(
        ctx,
        source,
        payload,
        published_at=published_at,
        original_name=name,
        content_type=content_type_ or (content_type(name) if name else None),
        allow_mass_delete=allow_mass_delete,
        allow_future=allow_future,
    )
    return Ingested.of(result)


def archive(
    ctx: Context,
    source: str,
    payload: str | os.PathLike[str] | bytes,
    published_at: int | str | None,
    name: str | None,
    allow_future: bool,
) -> Payload:
    """`Source.archive_add`: archive the payload without applying it."""
    if not isinstance(payload, bytes):
        name = name or Path(payload).name
    ref, created = archive_add(
        ctx,
        source,
        payload if isinstance(payload, bytes) else read(Path(payload)),
        published_at=published_at,
        original_name=name,
        content_type=content_type(name) if name else None,
        allow_future=allow_future,
    )
    return Payload.of(ref, created)


def run_result(source: str, result: Any) -> Ingested | Recovered | NothingToDo | NotModified:
    """`Source.run`'s result typed: not modified, nothing new, several publications
    applied as one backfill (Recovered), or one live run."""
    from feedledger.pipeline.catchup.recovery import (  # lazy: the payload readers
        Recovery,
    )
    from feedledger.pipeline.intake.run import (
        NothingNew,  # lazy: a snapshot loads no payload reader
    )

    if result is None:
        return NotModified(source)
    if isinstance(result, NothingNew):
        return NothingToDo(result.source, result.reason, None, result)
    if isinstance(result, Recovery):
        assert result.report is not None
        return Recovered(
            result.source, list(result.days), len(result.archived), WindowRun.of(result.report)
        )
    return Ingested.of(result)
