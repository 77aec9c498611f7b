"""What a source's publisher states now, asked without archiving or applying anything:
the newest publication's publisher date and a version text that changes exactly when
the publication does (an orchestrator's observation: `Source.peek`, the Dagster
integration's observable source asset).

Asked as cheaply as the location allows:

* a portal connector (ArcGIS, Socrata, CKAN): its metadata alone -- the layer's
  `dataLastEditDate`, the view's `rowsUpdatedAt`, the resource's modification date --
  through the fetcher's own "nothing new" path (a watermark no date passes), so no row
  is downloaded;
* a folder: the newest dated file name (nothing read);
* an http(s) URL: a HEAD request's ETag (else its Last-Modified);
* anything else (a `{date}` template, a URL stating neither header, a folder of files
  dated by a field): the newest payload fetched, its bytes hashed and dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import httpx

from feedledger.model.errors import ConfigError, FetchError, StaleWatermarkError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.sources.directory import list_dated
from feedledger.sources.dispatch import fetch, location_directory, location_kind
from feedledger.sources.http import display_url, http_date

# a watermark no publisher date passes: the connectors stop after their metadata
_NEVER_AFTER = 253_402_300_799_000_000  # 9999-12-31T23:59:59Z, us UTC


@dataclass(frozen=True)
class Peeked:
    source: str
    published_at: int | None  # us UTC; None: the payload states it (a field)
    version: str  # changes exactly when the publication does
    etag: str | None
    via: str  # metadata | listing | head | fetched


def peek(src: SourceConfig) -> Peeked:
    """The newest publication of `src` as its publisher states it (module doc)."""
    if src.fetch is None:
        raise ConfigError(
            "source has no fetch location to observe",
            source=src.name,
            hint="set fetch in feedledger.toml",
        )
    if src.connector is not None:
        return _connector(src)
    kind = location_kind(src.fetch.strip())
    if kind == "directory" and src.published_from.field is None:
        got = _newest_file(src)
        if got is not None:
            return got
    if kind == "url":
        got = _head(src)
        if got is not None:
            return got
    return _fetched(src)


def _connector(src: SourceConfig) -> Peeked:
    try:
        got = fetch(src, watermark=_NEVER_AFTER)
    except StaleWatermarkError as exc:
        stated: int | None = getattr(exc, "published_at", None)
        if stated is None:
            raise
        return Peeked(src.name, stated, f"{src.connector}:{iso(stated)}", None, "metadata")
    # a layer dated by a field states no date of its own: its bytes were downloaded
    return _of_bytes(src, got.data or b"", got.published_at, got.etag)


def _newest_file(src: SourceConfig) -> Peeked | None:
    dated = list_dated(location_directory((src.fetch or "").strip()), src.timezone)
    if not dated:
        return None
    instant, path = dated[-1]
    return Peeked(src.name, instant, f"{iso(instant)} {path.name}", None, "listing")


def _head(src: SourceConfig) -> Peeked | None:
    url = (src.fetch or "").strip()
    try:
        with httpx.Client(timeout=min(30.0, src.fetch_deadline_s)) as client:
            response = client.head(url, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise FetchError(f"HEAD {display_url(url)} failed: {exc}", source=src.name) from exc
    if response.status_code >= 400:
        return None  # a server refusing HEAD may still serve GET
    etag = response.headers.get("etag")
    modified = response.headers.get("last-modified")
    stated: int | None = None
    if modified:
        try:
            stated = http_date(modified, "UTC")
        except ConfigError:
            stated = None
    if src.published_from.header is not None and src.published_from.header.lower() not in (
        "last-modified",
    ):
        return None  # dated by another header: the GET states it
    if etag:
        return Peeked(src.name, stated, f"etag:{etag}", etag, "head")
    if stated is not None:
        return Peeked(src.name, stated, f"last-modified:{iso(stated)}", None, "head")
    return None


def _fetched(src: SourceConfig) -> Peeked:
    got = fetch(src)
    return _of_bytes(src, got.data or b"", got.published_at, got.etag)


def _of_bytes(src: SourceConfig, data: bytes, published_at: int | None, etag: str | None) -> Peeked:
    digest = hashlib.sha256(data).hexdigest()[:16]
    stated = iso(published_at) if published_at is not None else "undated"
    return Peeked(src.name, published_at, f"{stated} sha256:{digest}", etag, "fetched")
