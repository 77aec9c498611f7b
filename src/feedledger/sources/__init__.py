"""Fetchers: get the newest payload a source has published (directory, HTTP)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig
from feedledger.sources.dated import Fetched, FetchState, date_in_name
from feedledger.sources.directory import fetch_directory, list_dated
from feedledger.sources.http import fetch_http

_SCHEME_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


def fetch(
    src: SourceConfig,
    *,
    previous: FetchState | None = None,
    client: httpx.Client | None = None,
) -> Fetched:
    """Fetch the newest payload of `src`: an http(s) URL, a file:// URL or a directory path."""
    if src.fetch is None:
        raise ConfigError(
            "source has no fetch location", source=src.name, hint="set fetch in feedledger.toml"
        )
    location = src.fetch.strip()
    match = _SCHEME_RE.match(location)
    if match is None:
        return fetch_directory(src.model_copy(update={"fetch": location}))
    scheme = match["scheme"].lower()
    if scheme in ("http", "https"):
        return fetch_http(src, previous=previous, client=client)
    if scheme == "file":
        path = Path(url2pathname(urlsplit(location).path))
        return fetch_directory(src.model_copy(update={"fetch": str(path)}))
    raise ConfigError(
        f"unsupported fetch location scheme {scheme!r}",
        source=src.name,
        hint="use an http(s):// URL or a directory path",
    )


__all__ = [
    "FetchState",
    "Fetched",
    "date_in_name",
    "fetch",
    "fetch_directory",
    "fetch_http",
    "list_dated",
]
