"""The archive's sidecar format (one JSON file per publication) and the checks on the
names it is built from. Shared by every archive backend, so that `archive reindex` reads
any of them the same way."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from feedledger.model.errors import AmbiguousPayloadError, ConfigError
from feedledger.model.payload import PayloadRef, payload_id_for
from feedledger.model.timeutil import iso

SIDECAR_FORMAT = 1
SHA_RE = re.compile(r"^[0-9a-f]{64}$")
SOURCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SIDECAR_RE = re.compile(r"^(?P<ts>\d{20})-(?P<pid>[0-9a-f]+)\.json$")


def check_source(source: str) -> None:
    if not SOURCE_RE.match(source):
        raise ConfigError(
            f"source name {source!r} cannot be used in the archive: it must start with a "
            "letter or digit and use only letters, digits, '_', '.', '-'"
        )


def check_instant(value: int, what: str, source: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be int microseconds since the epoch, got {value!r}")
    if value < 0:
        try:
            shown = iso(value)
        except (OverflowError, ValueError):  # before year 1
            shown = "a date before year 1"
        words = _INSTANT_WORDS.get(what, what)
        raise ConfigError(
            f"{words} {shown} is before 1970-01-01; the archive keeps dates from 1970-01-01 on",
            source=source,
        )


_INSTANT_WORDS = {"published_at": "the publisher date", "fetched_at": "the fetch time"}


def new_ref(
    source: str,
    data: bytes,
    *,
    published_at: int,
    fetched_at: int,
    original_name: str | None,
    content_type: str | None,
    sha256: str | None,
    size: int | None = None,
) -> PayloadRef:
    """The ref of `data` as a publication of `source` (checked; `sha256` is trusted when
    the caller already hashed the bytes, and `size` with it when the caller stored them
    from their file and passes no bytes): what every archive backend's `put` files."""
    check_source(source)
    check_instant(published_at, "published_at", source)
    check_instant(fetched_at, "fetched_at", source)
    sha = sha256 or hashlib.sha256(data).hexdigest()
    return PayloadRef(
        payload_id=payload_id_for(source, published_at, sha),
        source=source,
        sha256=sha,
        published_at=published_at,
        fetched_at=fetched_at,
        size=len(data) if size is None else size,
        original_name=original_name,
        content_type=content_type,
    )


def sidecar_name(published_at: int, payload_id: str) -> str:
    return f"{published_at:020d}-{payload_id}.json"


def sidecar_json(ref: PayloadRef, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sidecar's members; `metadata`: what the publisher stated about the payload
    (a portal connector's, e.g. an ArcGIS layer's), recorded as it is and read by
    nothing the payload's replay needs."""
    doc = {
        "format": SIDECAR_FORMAT,
        "payload_id": ref.payload_id,
        "source": ref.source,
        "sha256": ref.sha256,
        "published_at": iso(ref.published_at),
        "published_at_us": ref.published_at,
        "fetched_at": iso(ref.fetched_at),
        "fetched_at_us": ref.fetched_at,
        "size": ref.size,
        "original_name": ref.original_name,
        "content_type": ref.content_type,
    }
    if metadata is not None:
        doc["metadata"] = metadata
    return doc


def sidecar_bytes(ref: PayloadRef, metadata: dict[str, Any] | None = None) -> bytes:
    """A sidecar's exact bytes (every backend writes the same ones)."""
    return (json.dumps(sidecar_json(ref, metadata), indent=2) + "\n").encode("utf-8")


def ambiguous(ref: PayloadRef, rival_ids: list[str], kept_at: str) -> AmbiguousPayloadError:
    """The error for different bytes claiming an already taken publisher timestamp."""
    return AmbiguousPayloadError(
        f"two payloads claim publisher timestamp {iso(ref.published_at)}; refused as "
        "ambiguous unless the bytes are identical (archived payload "
        f"{', '.join(rival_ids)}, new payload {ref.payload_id}; the new bytes are kept for "
        f"inspection, see {kept_at})",
        source=ref.source,
        payload=ref.label,
    )


def parse_sidecar_bytes(raw: bytes, *, name: str | None, parent: str | None) -> PayloadRef:
    """Parse a sidecar stored as `<parent>/<name>`; ValueError (with the reason) if it is
    not a valid, consistent one (its name and folder, unless None, must match it)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read it: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("it is not a JSON object")
    if doc.get("format") != SIDECAR_FORMAT:
        raise ValueError(f"unknown sidecar format {doc.get('format')!r}")

    def field(key: str, kind: type[Any], *, optional: bool = False) -> Any:
        value = doc.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(f"field {key!r} is missing or not a {kind.__name__}")
        return value

    ref = PayloadRef(
        payload_id=field("payload_id", str),
        source=field("source", str),
        sha256=field("sha256", str),
        published_at=field("published_at_us", int),
        fetched_at=field("fetched_at_us", int),
        size=field("size", int),
        original_name=field("original_name", str, optional=True),
        content_type=field("content_type", str, optional=True),
    )
    if not SHA_RE.match(ref.sha256):
        raise ValueError(f"sha256 {ref.sha256!r} is not a sha256 hex digest")
    expected = payload_id_for(ref.source, ref.published_at, ref.sha256)
    if ref.payload_id != expected:
        raise ValueError(
            f"payload_id {ref.payload_id!r} does not match its source, published_at and "
            f"sha256 (expected {expected!r})"
        )
    if name is not None and name != sidecar_name(ref.published_at, ref.payload_id):
        raise ValueError("its file name does not match its published_at and payload_id")
    if parent is not None and parent != ref.source:
        raise ValueError(f"it names source {ref.source!r} but lies under {parent!r}")
    return ref
