"""The public `fetch`: the newest payload a source has published, whatever its fetch
location -- a `{date}` template (`templates.py`) or one concrete location
(`location.py`). Both of those sit below this module, so nothing imports upwards."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx

from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig
from feedledger.sources.ckan import fetch_ckan
from feedledger.sources.dated import Fetched, FetchState
from feedledger.sources.location import fetch_location
from feedledger.sources.socrata import fetch_socrata
from feedledger.sources.templates import is_template, newest_of_template

if TYPE_CHECKING:
    from feedledger.sources.arcgis_query import PageSink


def location_kind(location: str) -> str:
    """What a fetch location is: "template" (it carries `{date}`), "url" (http or
    https) or "directory" (a path or a file:// URL)."""
    if is_template(location):
        return "template"
    if location.lower().startswith(("http://", "https://")):
        return "url"
    return "directory"


def location_directory(location: str) -> Path:
    """The folder a "directory" location names (a path, `~` expanded, or a file:// URL)."""
    if location.lower().startswith("file://"):
        return Path(url2pathname(urlsplit(location).path))
    return Path(location).expanduser()


def fetch(
    src: SourceConfig,
    *,
    previous: FetchState | None = None,
    client: httpx.Client | None = None,
    single: bool = False,
    now_us: int | None = None,
    watermark: int | None = None,
    pages: PageSink | None = None,
) -> Fetched:
    """Fetch the newest payload of `src`: an http(s) URL, a file:// URL or a directory
    path. A location carrying `{date}` (sources/templates.py) is tried for the newest
    expected publication date first, then earlier ones. `single`: the location is one
    file (a filled template), not a directory to pick the newest from. `now_us`: the
    caller's clock (the scheduler's), for a template's newest expected date. A portal
    connector (`src.connector`: sources/socrata.py, sources/ckan.py, sources/arcgis.py)
    asks the portal's API instead; `watermark` (us UTC): it stops before downloading
    rows when the portal's publisher date is not after it (StaleWatermarkError,
    "nothing new"). `pages`: an ArcGIS layer's pages are handed to it as they arrive."""
    if src.fetch is None:
        raise ConfigError(
            "source has no fetch location", source=src.name, hint="set fetch in feedledger.toml"
        )
    if src.connector == "socrata":
        return fetch_socrata(src, watermark=watermark, client=client)
    if src.connector == "ckan":
        return fetch_ckan(src, watermark=watermark, client=client)
    if src.connector == "arcgis":
        from feedledger.sources.arcgis import fetch_arcgis  # lazy: arcgis2geojson, msgspec

        return fetch_arcgis(src, watermark=watermark, client=client, sink=pages)
    location = src.fetch.strip()
    if not single and is_template(location):
        return newest_of_template(src, now_us)
    return fetch_location(src, location, previous=previous, client=client, single=single)
