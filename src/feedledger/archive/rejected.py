"""Refused payloads kept for inspection, and how every archive backend lists them.

Two kinds live under ``rejected/``:

* ``rejected/<source>/<published_at_us:020d>-<payload_id>.json``: the sidecar of a
  payload refused as ambiguous (another payload holds its publisher timestamp);
* ``rejected/<source>/<sha[:16]>-<reason hash>.json``: a note on bytes that could not be
  read or dated, for a declared source; ``rejected/_unfiled/`` holds the same notes for
  bytes whose source is unknown (and, in archives written before notes were filed per
  source, for every one of them: those are still listed under the source they name).

The bytes themselves are objects like any other (``objects/<sha[:2]>/<sha>``). `listed`
lists them over any blob store (`archive/core.py`'s `rejected`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from feedledger.archive.blobs import BlobStore
from feedledger.archive.sidecar import SHA_RE, SIDECAR_RE, SOURCE_RE, parse_sidecar_bytes
from feedledger.model.timeutil import iso

UNFILED = "_unfiled"
NOTE_FORMAT = 1

RejectedKind = Literal["unreadable", "ambiguous"]


@dataclass(frozen=True)
class RejectedPayload:
    """One refused payload: what it was, why it was refused, where its bytes are."""

    source: str
    kind: RejectedKind
    sha256: str
    size: int
    reason: str
    original_name: str | None
    rejected_at: int | None  # us UTC; None in notes written before it was recorded
    published_at: int | None  # the publisher timestamp an ambiguous payload claimed
    payload_id: str | None  # an ambiguous payload's id
    location: str  # the bytes (object path or URL)
    note: str  # the note or sidecar describing them

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "sha256": self.sha256,
            "size": self.size,
            "reason": self.reason,
            "original_name": self.original_name,
            "rejected_at": iso(self.rejected_at) if self.rejected_at is not None else None,
            "published_at": iso(self.published_at) if self.published_at is not None else None,
            "payload_id": self.payload_id,
            "location": self.location,
            "note": self.note,
        }


def note_folder(source: str, *, filed: bool) -> str:
    """The folder under ``rejected/`` for a note on `source`'s bytes: the source's own
    when it is known (and a usable name), else ``_unfiled``."""
    return source if filed and SOURCE_RE.match(source) else UNFILED


def note(
    source: str,
    sha256: str,
    size: int,
    original_name: str | None,
    reason: str,
    rejected_at: int,
) -> tuple[str, bytes]:
    """Name and bytes of a note on unusable bytes (the name depends on the bytes and the
    reason only, so the same refusal twice is kept once)."""
    doc = {
        "format": NOTE_FORMAT,
        "source": source,
        "sha256": sha256,
        "size": size,
        "original_name": original_name,
        "reason": reason,
        "rejected_at": iso(rejected_at),
        "rejected_at_us": rejected_at,
    }
    name = f"{sha256[:16]}-{hashlib.sha256(reason.encode()).hexdigest()[:8]}.json"
    return name, (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def parse(raw: bytes, *, folder: str, name: str, note_at: str, object_at: Any) -> RejectedPayload:
    """One file under ``rejected/<folder>/<name>``; ValueError if it is neither a note nor
    a sidecar. `object_at(sha256)` gives where an object's bytes are."""
    if SIDECAR_RE.match(name):
        ref = parse_sidecar_bytes(raw, name=name, parent=folder)
        return RejectedPayload(
            source=ref.source,
            kind="ambiguous",
            sha256=ref.sha256,
            size=ref.size,
            reason="another payload holds its publisher timestamp "
            f"{iso(ref.published_at)} (refused as ambiguous)",
            original_name=ref.original_name,
            rejected_at=ref.fetched_at,
            published_at=ref.published_at,
            payload_id=ref.payload_id,
            location=str(object_at(ref.sha256)),
            note=note_at,
        )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read it: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != NOTE_FORMAT:
        raise ValueError("it is not a rejected-payload note")
    sha, size, source = doc.get("sha256"), doc.get("size"), doc.get("source")
    if not isinstance(sha, str) or not isinstance(size, int) or not isinstance(source, str):
        raise ValueError("its sha256, size or source is missing")
    if not SHA_RE.match(sha):
        raise ValueError(f"sha256 {sha!r} is not a sha256 hex digest")
    at = doc.get("rejected_at_us")
    name_of = doc.get("original_name")
    return RejectedPayload(
        source=source,
        kind="unreadable",
        sha256=sha,
        size=size,
        reason=str(doc.get("reason") or ""),
        original_name=name_of if isinstance(name_of, str) else None,
        rejected_at=at if isinstance(at, int) and not isinstance(at, bool) else None,
        published_at=None,
        payload_id=None,
        location=str(object_at(sha)),
        note=note_at,
    )


def order(items: list[RejectedPayload]) -> list[RejectedPayload]:
    """Oldest refusal first (unknown times first), then by bytes."""
    return sorted(items, key=lambda r: (r.rejected_at or 0, r.sha256, r.note))


def listed(
    blobs: BlobStore, source: str, object_rel: Callable[[str], str]
) -> list[RejectedPayload]:
    """Refused payloads of `source` in `blobs` (filed under it, or unfiled notes naming
    it; `object_rel`: where an object's bytes are), oldest refusal first. Unreadable
    notes are skipped with a warning."""
    where = blobs.where
    rels = [
        rel
        for folder in (source, UNFILED)
        for rel in blobs.list(f"rejected/{folder}/")
        if rel.endswith(".json") and len(rel.split("/")) == 3 and "/." not in rel
    ]
    contents = blobs.read_many(rels)
    found: list[RejectedPayload] = []
    for rel in rels:
        raw = contents[rel]
        if raw is None:
            continue  # deleted since the listing
        _, folder, name = rel.split("/")
        try:
            if isinstance(raw, OSError):
                raise raw
            item = parse(
                raw,
                folder=folder,
                name=name,
                note_at=where(rel),
                object_at=lambda sha: where(object_rel(sha)),
            )
        except (OSError, ValueError) as exc:
            warnings.warn(f"skipping rejected-payload note {where(rel)}: {exc}", stacklevel=3)
            continue
        if item.source == source:
            found.append(item)
    return order(found)
