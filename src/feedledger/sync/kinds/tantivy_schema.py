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
tokenizer: lower-cased words; `zone:r1`), and `fl_text`, every string member of the
document (the default field when no text field is declared).

One index per directory; its schema is fixed when it is created: an existing index
must have the guard's fields and the destination's text fields (ConfigError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    import tantivy  # lazy: the `search` extra

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("fl_key", stored=True, tokenizer_name="raw", fast=True)
    sb.add_integer_field("fl_revision", stored=True, indexed=True, fast=True)
    sb.add_text_field("fl_generation", stored=True, tokenizer_name="raw")
    sb.add_integer_field("fl_generation_rank", stored=True, indexed=True, fast=True)
    sb.add_integer_field("fl_deleted", stored=True, indexed=True, fast=True)
    sb.add_text_field("fl_content_hash", stored=True, tokenizer_name="raw")
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


def document(d: Doc, text_fields: tuple[str, ...], written_at: int) -> Any:
    """The index's document for a guarded write (a tombstone: the guard's fields only)."""
    import tantivy  # lazy: the `search` extra

    doc = tantivy.Document()
    doc.add_text("fl_key", d.key)
    doc.add_integer("fl_revision", int(d.revision))
    doc.add_text("fl_generation", d.generation)
    doc.add_integer("fl_generation_rank", int(d.rank))
    doc.add_integer("fl_deleted", 1 if d.deleted else 0)
    doc.add_text("fl_content_hash", d.content_hash)
    doc.add_integer("fl_written_at", written_at)
    if d.deleted or d.doc is None:
        return doc
    doc.add_bytes("fl_doc", d.doc.encode("utf-8"))
    if d.wkb is not None:
        doc.add_bytes("fl_wkb", bytes(d.wkb))
    parsed = json.loads(d.doc)
    members = parsed if isinstance(parsed, dict) else {"value": parsed}
    for name, value in members.items():
        if name == "geometry":
            continue
        text = as_text(value)
        if text is None:
            continue
        if isinstance(value, str):
            doc.add_text(ALL_TEXT, text)
        if name in text_fields:
            doc.add_text(name, text)
    return doc


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
