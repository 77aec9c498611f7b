"""From a ledger version to a destination document.

A transform is `module:function`, called with one version as a dict (`key` as a list,
`attributes`, `valid_from`, `revision`, `deleted`) and returning the document (a dict),
or None for "not in this destination" (written as a tombstone). The default document is
the version's attributes. A transform that raises rejects that record, with the error.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable
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


def default_doc(row: Any, generation: str, rank: int) -> Doc:
    """`build` without a transform and without a revision field (the revision is the
    version id), from a (key, attributes, revision, deleted, version_id, valid_from)
    tuple -- the rebuild's hot path: no keyword call, no dict, no JSON."""
    key, attributes, _rev, deleted, version_id, _vf = row
    text = None if deleted else attributes
    data = b"\x00tombstone" if text is None else text.encode("utf-8")
    return Doc(key, int(version_id), generation, rank,
               hashlib.sha256(data).hexdigest()[:32], text is None, text)  # fmt: skip


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


def content_hash(doc_text: str | None) -> str:
    data = b"\x00tombstone" if doc_text is None else doc_text.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:32]


def build(
    row: Any,
    *,
    transform: Transform | None,
    generation: str,
    rank: int,
    use_revision_field: bool,
) -> Doc:
    """A Doc from a version row (key, attributes, revision, deleted, version_id,
    valid_from). Raises ValueError / the transform's exception for a record to reject."""
    revision = revision_of(row.revision, int(row.version_id), use_revision_field)
    doc_text: str | None
    if row.deleted:
        doc_text = None
    elif transform is None:
        doc_text = row.attributes  # canonical JSON already
    else:
        made = transform(
            {
                "key": json.loads(row.key),
                "attributes": json.loads(row.attributes) if row.attributes else {},
                "valid_from": iso(row.valid_from),
                "revision": row.revision,
                "deleted": bool(row.deleted),
            }
        )
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
        else content_hash(doc_text),
        deleted=doc_text is None,
        doc=doc_text,
    )
