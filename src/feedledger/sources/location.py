"""Fetch one concrete location (no `{date}` field): an http(s) URL, a file:// URL or a
directory path, by its scheme. The bottom of the fetch dispatch: `templates.py` fills a
`{date}` and comes here; `dispatch.py` (the public `fetch`) picks between the two."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig
from feedledger.sources.dated import Fetched, FetchState
from feedledger.sources.directory import fetch_directory, read_file
from feedledger.sources.http import fetch_http

_SCHEME_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


def fetch_location(
    src: SourceConfig,
    location: str,
    *,
    previous: FetchState | None = None,
    client: httpx.Client | None = None,
    single: bool = False,
) -> Fetched:
    """Fetch `location` (the source's fetch location, stripped): the newest payload of a
    directory, or the one file / URL it names. `single`: the location is one file, not a
    directory to pick the newest from."""
    match = _SCHEME_RE.match(location)
    if match is None:
        if single:
            return read_file(src, Path(location).expanduser())
        return fetch_directory(src.model_copy(update={"fetch": location}))
    scheme = match["scheme"].lower()
    if scheme in ("http", "https"):
        return fetch_http(src, previous=previous, client=client)
    if scheme == "file":
        path = Path(url2pathname(urlsplit(location).path))
        if single:
            return read_file(src, path)
        return fetch_directory(src.model_copy(update={"fetch": str(path)}))
    raise ConfigError(
        f"unsupported fetch location scheme {scheme!r}",
        source=src.name,
        hint="use an http(s):// URL or a directory path",
    )
