"""Fetchers: get the newest payload a source has published (directory, HTTP, the
portal connectors).

May import: `feedledger.model` and the leaf utilities (`timing`, `faults`, `ahead`);
never its siblings `archive` and `config` or a layer above, nor SQL (pyproject's
[tool.importlinter]).

Modules, lowest first: `dated` (values), `directory` and `http` (one kind of location
each), `location` (one concrete location, by scheme), `templates` (`{date}` locations,
over `location`), `dispatch` (the public `fetch`, over both and the portal
connectors `socrata`, `ckan` and `arcgis` (an ArcGIS REST layer as one GeoJSON sequence,
its paging in `arcgis_query`, its page slicing in `json_slices`), which share
`portal`'s retrying JSON GET)."""

from __future__ import annotations

from feedledger.sources.dated import Fetched, FetchState, date_in_name
from feedledger.sources.directory import fetch_directory, list_dated, read_file
from feedledger.sources.dispatch import fetch, location_directory, location_kind
from feedledger.sources.http import fetch_http
from feedledger.sources.templates import fetch_day, for_day, is_template

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
    "location_directory",
    "location_kind",
    "read_file",
]
