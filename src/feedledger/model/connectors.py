"""Portal connectors (sources/socrata.py, sources/ckan.py, sources/arcgis.py): `fetch`
names the dataset on the portal, and the connector asks the portal's API for its rows and
publisher date. What a connector source's declaration must look like."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from feedledger.model.source import SourceConfig

Connector = Literal["socrata", "ckan", "arcgis"]
DEFAULT_PAGE_SIZE = 50_000  # Socrata rows per request ($limit)
SOCRATA_URL_RE = re.compile(
    r"^(?P<base>https?://[^/?#]+)/resource/(?P<id>[a-z0-9]{4}-[a-z0-9]{4})\.json$"
)
CKAN_URL_RE = re.compile(r"^(?P<base>https?://[^?#]+?)/dataset/(?P<name>[^/?#]+)/?$")
ARCGIS_URL_RE = re.compile(r"^https?://[^?#]+/(FeatureServer|MapServer)/\d+/?$")


def connector_problem(src: SourceConfig) -> str | None:
    """Why the source's connector options do not fit together (None: they do)."""
    if src.resource is not None and src.connector != "ckan":
        return "resource (--resource) is only for --connector ckan"
    if src.page_size is not None and src.connector != "socrata":
        return "page_size (--page-size) is only for --connector socrata"
    if src.token_env is not None and src.connector != "arcgis":
        return "token_env (--token-env) is only for --connector arcgis"
    if src.connector is None:
        if src.published_from.kind == "connector":
            return "published_from 'connector' is only for a --connector source"
        return None
    if src.published_from.header is not None:
        return (
            f"a --connector {src.connector} source is dated by its portal (published_from "
            f"'connector'), not by an HTTP header ({str(src.published_from)!r})"
        )
    url = (src.fetch or "").strip()
    if not url:
        return f"--connector {src.connector} needs --fetch URL naming the dataset"
    if src.connector == "socrata":
        if SOCRATA_URL_RE.match(url) is None:
            return (
                f"a Socrata fetch URL must be https://HOST/resource/<4x4 id>.json "
                f"(such as https://data.example.gov/resource/abcd-1234.json), not {url!r}"
            )
        if src.format != "json":
            return "a Socrata source's rows arrive as one JSON array: use --format json"
        return None
    if src.connector == "arcgis":
        if ARCGIS_URL_RE.match(url) is None:
            return (
                "an ArcGIS fetch URL must name one layer, https://HOST/.../FeatureServer/N "
                f"or .../MapServer/N, not {url!r}"
            )
        if src.format != "geojsonseq":
            return "an ArcGIS layer is archived as a GeoJSON sequence: use --format geojsonseq"
        return None
    if CKAN_URL_RE.match(url) is None:
        return f"a CKAN fetch URL must be https://HOST/dataset/NAME, not {url!r}"
    if not src.resource:
        return "--connector ckan needs --resource NAME_OR_ID (which of the dataset's files)"
    return None
