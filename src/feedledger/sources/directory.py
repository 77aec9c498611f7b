"""Fetch the newest dated file from a local (or mounted) directory."""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path

from feedledger.model.errors import (
    BadPayloadError,
    ConfigError,
    FetchError,
    NotFoundError,
)
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.sources.dated import Fetched, date_in_name

# Names of files that are still being written or are not payloads.
_PARTIAL_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".download", ".swp")
_SHOWN_NAMES = 5


def _is_candidate(name: str) -> bool:
    lower = name.lower()
    return not (
        name.startswith((".", "~")) or name.endswith("~") or lower.endswith(_PARTIAL_SUFFIXES)
    )


def _listing(path: Path, tz: str, source: str | None) -> tuple[list[tuple[int, Path]], list[str]]:
    """(dated files sorted by (instant, name), names of undated candidate files)."""
    if not path.exists():
        raise NotFoundError(f"fetch directory {path} does not exist", source=source)
    if not path.is_dir():
        raise ConfigError(f"fetch location {path} is not a directory", source=source)
    dated: list[tuple[int, Path]] = []
    undated: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if not _is_candidate(entry.name) or not entry.is_file():
                    continue
                instant = date_in_name(entry.name, tz)
                if instant is None:
                    undated.append(entry.name)
                else:
                    dated.append((instant, path / entry.name))
    except PermissionError as exc:
        raise ConfigError(
            f"cannot read fetch directory {path}: permission denied", source=source
        ) from exc
    except OSError as exc:
        raise FetchError(f"cannot read fetch directory {path}: {exc}", source=source) from exc
    dated.sort(key=lambda item: (item[0], item[1].name))
    undated.sort()
    return dated, undated


def listing(
    path: Path | str, tz: str, source: str | None = None
) -> tuple[list[tuple[int, Path]], list[str]]:
    """(dated payload files ascending by (instant, name), names of undated candidates)."""
    return _listing(Path(path).expanduser(), tz, source)


def list_dated(path: Path | str, tz: str, *, source: str | None = None) -> list[tuple[int, Path]]:
    """Every dated payload file in `path` (not recursive), ascending by (instant, name).

    Hidden files and partial downloads (*.tmp, *.part, ...) are skipped; so are files
    whose name carries no date.
    """
    dated, _ = _listing(Path(path).expanduser(), tz, source)
    return dated


def fetch_directory(src: SourceConfig) -> Fetched:
    """Read the file whose name carries the newest date."""
    if src.fetch is None:
        raise ConfigError("source has no fetch location", source=src.name)
    if src.published_from.header is not None:
        raise ConfigError(
            f"published_from {str(src.published_from)!r} needs an HTTP source, but fetch is the "
            f"directory {src.fetch}",
            source=src.name,
            hint="use 'filename' or 'field:NAME'",
        )
    path = Path(src.fetch).expanduser()
    dated, undated = _listing(path, src.timezone, src.name)
    if not dated:
        if undated:
            shown = ", ".join(undated[:_SHOWN_NAMES])
            more = len(undated) - _SHOWN_NAMES
            if more > 0:
                shown += f" and {more} more"
            problem = f"no file in {path} has a date in its name (saw: {shown})"
        else:
            problem = f"fetch directory {path} has no payload files"
        raise NotFoundError(
            problem,
            source=src.name,
            hint="name files with a date such as parcels_2026-08-06.csv or parcels_20260806.csv",
        )
    newest = dated[-1][0]
    winners = [p for instant, p in dated if instant == newest]
    if len(winners) > 1:
        names = ", ".join(p.name for p in winners)
        raise BadPayloadError(
            f"{len(winners)} files claim the newest date {iso(newest)}: {names}; "
            "refused as ambiguous",
            source=src.name,
            hint="remove or rename all but one",
        )
    return read_file(src, winners[0], newest)


def read_file(src: SourceConfig, path: Path, instant: int | None = None) -> Fetched:
    """One payload file; its publisher instant from its name unless given."""
    if not path.is_file():
        raise NotFoundError(f"no payload file {path}", source=src.name)
    try:
        size = path.stat().st_size
        if size > src.max_payload_bytes:
            raise BadPayloadError(
                f"{path} has {size:,} bytes, over this source's max_payload_bytes of "
                f"{src.max_payload_bytes:,} bytes; not read, nothing archived",
                source=src.name,
                payload=path.name,
                hint=f"raise max_payload_bytes in [sources.{src.name}] of feedledger.toml",
            )
        data = path.read_bytes()
    except PermissionError as exc:
        raise ConfigError(f"cannot read {path}: permission denied", source=src.name) from exc
    except OSError as exc:
        raise FetchError(f"cannot read {path}: {exc}", source=src.name) from exc
    if instant is None:
        instant = date_in_name(path.name, src.timezone)
    content_type, _ = mimetypes.guess_type(path.name)
    return Fetched(
        data=data,
        published_at=instant if src.published_from.by_filename else None,
        original_name=path.name,
        content_type=content_type,
    )
