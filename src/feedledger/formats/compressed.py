"""Compressed payloads and non-UTF-8 text, undone before a reader sees the bytes.

A payload is recognised as gzip (`1f 8b`) or zip (`PK\\x03\\x04`) by its first bytes,
never by its name alone; bzip2, xz, zstandard and 7-Zip are recognised the same way, to
be refused by name (alone or inside a gzip/zip), not read as garbled text. The archive
keeps the bytes as published (compressed): only the reader works on the decompressed
form. Decompression stops as soon as the output passes the source's `max_payload_bytes`
(a decompression bomb is refused, not read).
"""

from __future__ import annotations

import codecs
import gzip
import io
import zipfile
import zlib

from feedledger.formats.observations import clip, fail
from feedledger.model.source import SourceConfig

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
ZIP_EMPTY = b"PK\x05\x06"  # a zip with no member is its end record alone
# compressions feedledger does not undo, by their first bytes: named in a refusal
# rather than read as text ("invalid UTF-8 at byte 0")
_UNREAD_MAGIC = (
    (b"BZh", "a bzip2"),  # then the block size digit and 31 41 59 26 53 59 (checked below)
    (b"\xfd7zXZ\x00", "an xz"),
    (b"\x28\xb5\x2f\xfd", "a zstandard"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip"),
)
_CHUNK = 1 << 20
_IGNORED_MEMBERS = ("__MACOSX/",)  # resource forks macOS's archiver adds

__all__ = ["GZIP_MAGIC", "ZIP_MAGIC", "decode_text", "decompress", "not_parquet"]


def _bomb(src: SourceConfig, label: str, what: str) -> Exception:
    return fail(
        src,
        label,
        f"{what} decompresses to more than this source's max_payload_bytes of "
        f"{src.max_payload_bytes:,} bytes (a decompression bomb?); not read "
        f"(raise max_payload_bytes in [sources.{src.name}] of feedledger.toml if it is genuine)",
    )


def decompress(data: bytes, src: SourceConfig, label: str) -> bytes:
    """The payload's content: `data` itself, or what its gzip/zip wrapper holds.
    BadPayloadError for a corrupt or truncated archive, a zip holding several files,
    or content larger than `src.max_payload_bytes`."""
    outer = _wrapper(data)
    if outer is None:
        unread = _unread(data)
        if unread is not None:
            raise fail(
                src,
                label,
                f"the payload is {unread} file: feedledger reads gzip or zip (or "
                "uncompressed) payloads only; publish it in one of those",
            )
        return data
    if outer == "an empty zip":
        raise fail(src, label, "the payload is an empty zip archive: it holds no file")
    content = _gunzip(data, src, label) if outer == "a gzip" else _unzip(data, src, label)
    inner = _wrapper(content) or _unread(content)
    if inner is not None:
        raise fail(
            src,
            label,
            f"the payload is {inner} file inside {outer} file (compressed twice): "
            "feedledger undoes one layer; publish it compressed once",
        )
    return content


def _wrapper(data: bytes) -> str | None:
    """Which compressed wrapper `data` is, by its first bytes (None: not one)."""
    if data.startswith(GZIP_MAGIC):
        return "a gzip"
    if data.startswith(ZIP_MAGIC):
        return "a zip"
    if data.startswith(ZIP_EMPTY):
        return "an empty zip"
    return None


def plain_utf8(head: bytes, src: SourceConfig) -> bool:
    """Whether a payload beginning with `head` is taken as it stands for `src`: neither
    compressed (by its first bytes) nor in an encoding other than UTF-8 (`decompress`
    and `decode_text` return it unchanged)."""
    return _wrapper(head) is None and _unread(head) is None and _is_utf8(src.encoding)


def not_parquet(data: bytes) -> str | None:
    """Why `data`, which a Parquet reader refused, is no Parquet file, in the user's
    words, when its bytes tell (None: they do not). A Parquet payload is read as
    published: a compressed wrapper around one is named, never undone."""
    wrapped = _wrapper(data) or _unread(data)
    if wrapped is not None:
        return (
            f"the payload is {wrapped} file, not Parquet: a Parquet payload is read as "
            "published, never decompressed (Parquet compresses its own columns); publish "
            "the .parquet file itself"
        )
    if not (data.startswith(b"PAR1") and data.endswith(b"PAR1")):
        return (
            "its bytes do not begin and end with Parquet's PAR1 marker (cut short, or "
            "another format)"
        )
    return None


def _unread(data: bytes) -> str | None:
    """Which compression feedledger does not undo `data` is, by its first bytes."""
    for magic, name in _UNREAD_MAGIC:
        if data.startswith(magic):
            if magic == b"BZh" and not (data[3:4].isdigit() and data[4:10] == b"1AY&SY"):
                continue
            return name
    return None


def _gunzip(data: bytes, src: SourceConfig, label: str) -> bytes:
    """Every gzip member in turn (concatenated members are one stream, as gzip reads
    them; zero padding after the last is allowed), read a chunk at a time."""
    limit = src.max_payload_bytes
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
            while chunk := stream.read(_CHUNK):
                out += chunk
                if len(out) > limit:
                    raise _bomb(src, label, "the gzip payload")
    except EOFError:
        raise fail(
            src,
            label,
            f"truncated gzip payload: the compressed stream ends early (after {len(data):,} bytes)",
        ) from None
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise fail(src, label, f"corrupt gzip payload: {clip(str(exc), 120)}") from None
    return bytes(out)


def _unzip(data: bytes, src: SourceConfig, label: str) -> bytes:
    limit = src.max_payload_bytes
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [
                info
                for info in archive.infolist()
                if not info.is_dir() and not info.filename.startswith(_IGNORED_MEMBERS)
            ]
            if not members:
                raise fail(
                    src,
                    label,
                    "the payload is a zip archive holding no file (only folders or "
                    "__MACOSX/ entries)",
                )
            if len(members) != 1:
                names = [clip(m.filename, 60) for m in members[:10]]
                more = f" and {len(members) - 10} more" if len(members) > 10 else ""
                raise fail(
                    src,
                    label,
                    f"zip payload holds {len(members)} files {names}{more}; "
                    "a payload must be a zip of exactly one file",
                )
            member = members[0]
            if member.file_size > limit:
                raise _bomb(src, label, f"zip member {clip(member.filename, 60)!r}")
            out = bytearray()
            with archive.open(member) as stream:
                while chunk := stream.read(_CHUNK):
                    out += chunk
                    if len(out) > limit:
                        raise _bomb(src, label, f"zip member {clip(member.filename, 60)!r}")
            return bytes(out)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise fail(src, label, f"corrupt or truncated zip payload: {clip(str(exc), 120)}") from None


def decode_text(data: bytes, src: SourceConfig, label: str) -> bytes:
    """`data` as UTF-8, decoded from the source's declared `encoding` (UTF-8 is returned
    as it is: its checks stay with the readers). A byte sequence invalid in the declared
    encoding is a BadPayloadError naming its byte offset."""
    encoding = src.encoding
    if _is_utf8(encoding):
        return data
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise fail(
            src,
            label,
            f"invalid {encoding} at byte {exc.start} (line {line}): "
            f"{data[exc.start : exc.start + 4]!r} cannot be decoded",
        ) from None
    return text.encode("utf-8")


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"
