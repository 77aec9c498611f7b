"""From a ledger version to a destination document.

A transform is `module:function`, called with one version as a dict (`key` as a list,
`attributes`, `valid_from`, `revision`, `deleted`, and for a GIS source `geometry`: the
geometry as stated, a GeoJSON object, or None) and returning the document (a dict), or
None for "not in this destination" (written as a tombstone). The default document is the
version's attributes (a GIS source's with a `geometry` member, GeoJSON). A transform that
raises rejects that record, with the error.

A GIS source's Doc also carries the version's geometry as WKB (`wkb`, the destination
table's `geometry_wkb` column) whatever the transform returns, and its content hash covers
the geometry, so a change of the geometry alone is a change of the document.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from feedledger.model.destination import FILTERED_HASH
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import iso, parse_instant, to_us

Transform = Callable[[dict[str, Any]], dict[str, Any] | None]
_INT_RE = re.compile(r"^-?\d{1,18}$")


def load(spec: str | None) -> Transform | None:
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"transform {spec!r} must be MODULE:FUNCTION")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load transform {spec!r}: {exc}") from None
    if not callable(fn):
        raise ConfigError(f"transform {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


class Doc(NamedTuple):
    """One guarded write: key (canonical JSON text), source revision, generation,
    content hash, tombstone flag and the document (JSON text, None for a tombstone)."""

    key: str
    revision: int
    generation: str
    rank: int
    content_hash: str
    deleted: bool
    doc: str | None
    wkb: bytes | None = None  # a GIS source's geometry (ISO WKB; None: none, or a tombstone)


def default_doc(row: Any, generation: str, rank: int) -> Doc:
    """`build` without a transform and without a revision field (the revision is the
    version id), from a (key, attributes, revision, deleted, version_id, valid_from)
    tuple -- the rebuild's hot path: no keyword call, no dict, no JSON."""
    key, attributes, _rev, deleted, version_id, _vf = row
    text = None if deleted else attributes
    data = b"\x00tombstone" if text is None else text.encode("utf-8")
    return Doc(key, int(version_id), generation, rank,
               hashlib.sha256(data).hexdigest()[:32], text is None, text)  # fmt: skip


def default_docs(rows: Iterable[Any], generation: str, rank: int) -> list[Doc]:
    """`default_doc` of each row, in one comprehension (no call per row): the rebuild's
    batch of a source without transform, revision field or geometry."""
    sha, tomb = hashlib.sha256, b"\x00tombstone"
    return [
        Doc(r[0], int(r[4]), generation, rank,
            sha(tomb if (text := None if r[3] else r[1]) is None else text.encode("utf-8"))
            .hexdigest()[:32], text is None, text)
        for r in rows
    ]  # fmt: skip


def default_docs_of(
    rows: Sequence[Any], texts: Sequence[str | None], generation: str, rank: int
) -> list[Doc]:
    """`default_docs` of version rows as fetched (key, stored attributes, revision,
    deleted, version_id, ...) and their canonical attribute texts (sync/versions.py's
    `latest_texts`): one comprehension, each Doc made by `tuple.__new__`."""
    sha, tomb, new = hashlib.sha256, b"\x00tombstone", tuple.__new__
    return [
        new(Doc, (r[0], int(r[4]), generation, rank,
            sha(tomb if (text := None if r[3] else t) is None else text.encode("utf-8"))
            .hexdigest()[:32], text is None, text, None))
        for r, t in zip(rows, texts, strict=True)
    ]  # fmt: skip


def revision_of(value: str | None, version_id: int, use_field: bool) -> int:
    """The source revision as an orderable integer: the revision field's value (an
    integer, or an ISO timestamp as its instant in microseconds), or -- a source
    without one -- the ledger's version id, which grows with every version of a key."""
    if not use_field:
        return version_id
    if value is None:
        raise ValueError("the record has no revision")
    text = value.strip().strip('"')
    if _INT_RE.match(text):
        return int(text)
    try:
        return to_us(parse_instant(text, "UTC", what="revision"))
    except Exception:
        raise ValueError(f"revision {value!r} is neither an integer nor a timestamp") from None


def content_hash(doc_text: str | None, geometry: str | None = None) -> str:
    """The document's hash; `geometry` (a GIS source's GeoJSON text, not a tombstone's)
    is folded in, so the typed geometry column's changes are changes too."""
    data = b"\x00tombstone" if doc_text is None else doc_text.encode("utf-8")
    if doc_text is not None and geometry is not None:
        data += b"\x00geometry\x00" + geometry.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:32]


def with_geometry(attributes: str | None, geometry: str | None) -> str:
    """A GIS source's default document: its attributes (a JSON object's text) with a
    last member `geometry` (the GeoJSON text as stated, or null), spliced as text -- the
    rebuild's hot path: no decoding. The GIS readers refuse a property named `geometry`,
    so the member never hides an attribute."""
    member = '"geometry":' + (geometry.strip() if geometry else "null")
    body = attributes.strip() if attributes else "{}"
    inner = body[1:-1].strip()
    return "{" + (inner + "," if inner else "") + member + "}"


def build(
    row: Any,
    *,
    transform: Transform | None,
    generation: str,
    rank: int,
    use_revision_field: bool,
    geo: bool = False,
) -> Doc:
    """A Doc from a version row (key, attributes, revision, deleted, version_id,
    valid_from, geometry); `geo`: a GIS source's (the geometry in the document and the
    hash; its WKB is added by the caller, a batch at a time). Raises ValueError / the
    transform's exception for a record to reject."""
    revision = revision_of(row.revision, int(row.version_id), use_revision_field)
    doc_text: str | None
    if row.deleted:
        doc_text = None
    elif transform is None:
        # canonical JSON already
        doc_text = with_geometry(row.attributes, row.geometry) if geo else row.attributes
    else:
        version: dict[str, Any] = {
            "key": json.loads(row.key),
            "attributes": json.loads(row.attributes) if row.attributes else {},
            "valid_from": iso(row.valid_from),
            "revision": row.revision,
            "deleted": bool(row.deleted),
        }
        if geo:
            version["geometry"] = json.loads(row.geometry) if row.geometry else None
        made = transform(version)
        doc_text = (
            None
            if made is None
            else json.dumps(made, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        )
    return Doc(
        key=row.key,
        revision=revision,
        generation=generation,
        rank=rank,
        # left out by the transform: a tombstone, but not a deletion (model/destination.py)
        content_hash=FILTERED_HASH
        if doc_text is None and not row.deleted
        else content_hash(doc_text, (row.geometry or "null") if geo else None),
        deleted=doc_text is None,
        doc=doc_text,
    )


def wkb_of(texts: list[str | None]) -> list[bytes | str | None]:
    """Each GeoJSON text as ISO WKB (None for none), or -- a geometry GEOS cannot read --
    the problem, as one line (that record is rejected, the others written)."""
    import numpy as np  # lazy: numpy, shapely only for a geometry destination
    import shapely  # lazy: as above

    def one(text: str | None) -> bytes | str | None:
        try:
            return shapely.to_wkb(shapely.from_geojson(text), flavor="iso")  # type: ignore[no-any-return]
        except shapely.errors.GEOSException as exc:
            return f"its geometry cannot be written as WKB: {' '.join(str(exc).split())}"

    present = [t if t and t != "null" else None for t in texts]
    try:
        shapes = shapely.from_geojson(np.array(present, dtype=object))
    except shapely.errors.GEOSException:
        return [None if t is None else one(t) for t in present]
    return list(shapely.to_wkb(shapes, flavor="iso"))
