"""A tantivy destination's index: its schema, creating or checking it, and a document
as the index stores it.

The guard's position is stored as fields of every document, tombstones included:
`fl_key` (the record's canonical JSON key, `raw` tokenizer: a term delete or lookup
matches the key exactly -- under the default tokenizer an id with hyphens is split
into words and a term delete on it matches nothing), `fl_revision`, `fl_generation`,
`fl_generation_rank`, `fl_deleted` (1: a tombstone, kept as a document of its own, so
merges never drop it and it never expires), `fl_content_hash`, `fl_written_at`; the
document itself (`fl_doc`, its JSON text) and a GIS source's geometry (`fl_wkb`, ISO
WKB) stored, not indexed. Searched: one field per declared text field (the default
tokenizer: lower-cased words; `zone:r1`); with no text field declared, `fl_text`,
every string member of the document. Only what is searched or filtered is indexed
(`fl_key` without positions, `fl_deleted`, the text fields): the generation and the
content hash are stored bytes, the revision and rank fast columns (reconcile's sums).

One index per directory; its schema is fixed when it is created: an existing index
must have the guard's fields and the destination's text fields (ConfigError).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec

from feedledger.model.errors import ConfigError, StoreUnavailableError
from feedledger.sync.transform import Doc

GUARD_FIELDS = (
    "fl_key",
    "fl_revision",
    "fl_generation",
    "fl_generation_rank",
    "fl_deleted",
    "fl_content_hash",
    "fl_written_at",
)
ALL_TEXT = "fl_text"
DEFAULT_TABLE = "documents"  # a tantivy destination has no table: its `table` names this


def check_text_fields(fields: tuple[str, ...]) -> tuple[str, ...]:
    """The declared text fields as index fields: plain names, none of the index's own."""
    import tantivy  # lazy: the `search` extra

    for f in fields:
        if f.startswith("fl_") or not tantivy.SchemaBuilder.is_valid_field_name(f) or "." in f:
            raise ConfigError(
                f"text field {f!r} cannot be a tantivy field (letters, digits, underscores; "
                "not starting with fl_)"
            )
    return fields


def schema(text_fields: tuple[str, ...]) -> Any:
    """The index's fields: only what is searched or filtered is indexed (the key, `raw`,
    without positions; the tombstone flag; the text fields), the rest stored or fast."""
    import tantivy  # lazy: the `search` extra

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("fl_key", stored=True, tokenizer_name="raw", fast=True, index_option="basic")
    sb.add_integer_field("fl_revision", stored=True, fast=True)
    sb.add_bytes_field("fl_generation", stored=True)
    sb.add_integer_field("fl_generation_rank", stored=True, fast=True)
    sb.add_integer_field("fl_deleted", stored=True, indexed=True, fast=True)
    sb.add_bytes_field("fl_content_hash", stored=True)
    sb.add_integer_field("fl_written_at", stored=True)
    sb.add_bytes_field("fl_doc", stored=True)
    sb.add_bytes_field("fl_wkb", stored=True)
    sb.add_text_field(ALL_TEXT)
    for f in text_fields:
        sb.add_text_field(f)
    return sb.build()


def fields_of(path: Path) -> dict[str, dict[str, Any]] | None:
    """The fields of the index at `path` (name -> meta.json's entry), or None: none."""
    meta = path / "meta.json"
    if not meta.exists():
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ConfigError(
                f"{path} is not a tantivy index (a file, or a folder with other things in it)",
                hint="give a new or empty folder to --tantivy",
            )
        return None
    try:
        entries = json.loads(meta.read_text(encoding="utf-8"))["schema"]
        return {str(e["name"]): e for e in entries}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a readable tantivy index ({exc})") from None


def open_index(path: Path, text_fields: tuple[str, ...]) -> Any:
    """The index at `path`, created if absent, checked if present; its reader reloads
    only when asked (`reload()` after a commit: reads see the last commit, never block
    on the writer)."""
    import tantivy  # lazy: the `search` extra

    found = fields_of(path)
    if found is not None:
        missing = [f for f in (*GUARD_FIELDS, "fl_doc", ALL_TEXT) if f not in found]
        if missing:
            raise ConfigError(
                f"tantivy index {path} was not made by feedledger (no {', '.join(missing)})",
                hint="give a new or empty folder to --tantivy",
            )
        absent = [f for f in text_fields if f not in found]
        if absent:
            raise ConfigError(
                f"tantivy index {path} has no text field {', '.join(absent)} (its fields are "
                "fixed when it is created)",
                hint="declare the destination with the index's text fields, or a new folder",
            )
    try:
        path.mkdir(parents=True, exist_ok=True)
        if found is None:
            index = tantivy.Index(schema(text_fields), path=str(path))
        else:
            index = tantivy.Index.open(str(path))
        index.config_reader("Manual")
    except (OSError, ValueError) as exc:
        raise StoreUnavailableError(f"cannot open tantivy index {path}: {one_line(exc)}") from None
    return index


def document(d: Doc, text_fields: tuple[str, ...], written_at: int) -> str:
    """The index's document for a guarded write, as the JSON `IndexWriter.add_json`
    takes (bytes fields base64; a tombstone: the guard's fields only). The declared text
    fields are indexed each under its name; with none declared, every string member
    goes to `fl_text`."""
    out: dict[str, Any] = {
        "fl_key": d.key,
        "fl_revision": int(d.revision),
        "fl_generation": _b64(d.generation.encode("utf-8")),
        "fl_generation_rank": int(d.rank),
        "fl_deleted": 1 if d.deleted else 0,
        "fl_content_hash": _b64(d.content_hash.encode("ascii")),
        "fl_written_at": written_at,
    }
    if d.deleted or d.doc is None:
        return _encode(out).decode("utf-8")
    out["fl_doc"] = _b64(d.doc.encode("utf-8"))
    if d.wkb is not None:
        out["fl_wkb"] = _b64(bytes(d.wkb))
    parsed = _decode(d.doc)
    members = parsed if isinstance(parsed, dict) else {"value": parsed}
    if text_fields:
        for name in text_fields:
            text = as_text(members.get(name))
            if text is not None:
                out[name] = text
    else:
        words = [v for k, v in members.items() if isinstance(v, str) and k != "geometry"]
        if words:
            out[ALL_TEXT] = words
    return _encode(out).decode("utf-8")


def as_text(value: Any) -> str | None:
    """A member's value as searchable text (objects and arrays as their JSON)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
