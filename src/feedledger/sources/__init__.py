"""Fetchers: get the newest payload a source has published (directory, HTTP)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import SourceConfig
from feedledger.sources.dated import Fetched, FetchState, date_in_name
from feedledger.sources.directory import fetch_directory, list_dated, read_file
from feedledger.sources.http import fetch_http
from feedledger.sources.templates import fetch_day, for_day, is_template

_SCHEME_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


def fetch(
    src: SourceConfig,
    *,
    previous: FetchState | None = None,
    client: httpx.Client | None = None,
    single: bool = False,
    now_us: int | None = None,
) -> Fetched:
    """Fetch the newest payload of `src`: an http(s) URL, a file:// URL or a directory
    path. A location carrying `{date}` (sources/templates.py) is tried for the newest
    expected publication date first, then earlier ones. `single`: the location is one
    file (a filled template), not a directory to pick the newest from. `now_us`: the
    caller's clock (the scheduler's), for a template's newest expected date."""
    if src.fetch is None:
        raise ConfigError(
            "source has no fetch location", source=src.name, hint="set fetch in feedledger.toml"
        )
    location = src.fetch.strip()
    if not single and is_template(location):
        return _newest_of_template(src, now_us)
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


def _newest_of_template(src: SourceConfig, now: int | None, days_back: int = 31) -> Fetched:
    from datetime import timedelta

    from feedledger.model.cadence import expected_dates, local_date
    from feedledger.model.timeutil import now_us

    today = local_date(now if now is not None else now_us(), src.timezone)
    days = expected_dates(src.cadence, src.timezone, today - timedelta(days=days_back), today)
    for day in reversed(days):
        got = fetch_day(src, day)
        if got is not None:
            return got
    raise NotFoundError(
        f"the publisher serves none of the last {days_back} days' publications at {src.fetch}",
        source=src.name,
    )


__all__ = [
    "FetchState",
    "Fetched",
    "date_in_name",
    "fetch",
    "fetch_day",
    "fetch_directory",
    "fetch_http",
    "for_day",
    "is_template",
    "list_dated",
    "read_file",
]
