"""Querying an ArcGIS REST layer's features (the paging half of `arcgis.py`).

A `Session` asks the layer (`?f=json`) or its `/query` through `portal.Portal` (HTTP,
retries, size limit, deadline); an error ArcGIS answers with HTTP 200 fails in one
line naming its code and message. `download` gets every feature once, ordered by the
object-id field, as GeoJSON lines:

- by `resultOffset`/`resultRecordCount` where the layer states
  `advancedQueryCapabilities.supportsPagination`, else `returnIdsOnly` then
  `objectIds` batches (10.3 and older); pages of at most `maxRecordCount`;
- `f=geojson` where the layer lists geoJSON in `supportedQueryFormats` and its
  `currentVersion` is 10.4 or later; Esri JSON converted with `arcgis2geojson`
  otherwise. A GeoJSON page before 11.x has no `properties.exceededTransferLimit`:
  there a full page means "ask for the next" and a short one ends the paging (a page
  the server capped below the size asked for is caught by the count check below);
- every query asks `outSR=4326`, so the features are WGS84 whatever the layer's own
  spatial reference (an Esri JSON page stating another one is refused).

A GeoJSON page's features are not parsed and re-written: `json_slices.split_features`
(msgspec, the geometry skipped; else `split_page`, the stdlib's C scanner) keeps each
feature's text as the server wrote it (one line each; a feature spread over several
lines is re-serialised), so the archived line IS the fetched feature. While a page is
parsed, the next one is already being downloaded (`arcgis_ahead.PagesAhead`). The total is checked
against `returnCountOnly`, and no object id may be missing or repeated (a server that
ignores `resultOffset` answers the first page again: caught, never looped on).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from arcgis2geojson import arcgis2geojson

from feedledger.model.errors import BadPayloadError, FetchError
from feedledger.sources.arcgis_ahead import PagesAhead
from feedledger.sources.http import display_url, too_large
from feedledger.sources.json_slices import split_features, split_page
from feedledger.sources.portal import Portal

DEFAULT_MAX_RECORD_COUNT = 1000  # Esri's default when a layer does not state one
GEOJSON_SINCE = 10.4  # the first ArcGIS Server release answering f=geojson
OUT_WKID = 4326  # every query asks WGS84 (outSR), the only CRS GeoJSON knows (RFC 7946)
TOKEN_HINT = "check the token (ArcGIS 498: invalid or expired, 499: required)"


Line = tuple[Any, str]  # (object id, one GeoJSON Feature as text, no newline)


class PageSink(Protocol):
    """Who reads the layer while it downloads (pipeline/intake/run.py hands one in: a reader of
    `formats.spatial.geo_pages`): each page's checked lines, in order, as they arrive; `restart`
    when the download starts over (the layer was republished meanwhile)."""

    def restart(self) -> None: ...

    def page(self, lines: list[str]) -> None: ...


@dataclass
class Session:
    portal: Portal
    url: str
    token: str | None

    @property
    def name(self) -> str:
        return self.portal.src.name

    @property
    def shown(self) -> str:
        return display_url(self.url)

    def fail(self, problem: str) -> BadPayloadError:
        return BadPayloadError(problem, source=self.name, payload=self.shown)

    def _params(self, params: dict[str, str]) -> dict[str, str]:
        return params if self.token is None else {**params, "token": self.token}

    def _raise_error(self, url: str, error: Any) -> None:
        code = error.get("code", "?") if isinstance(error, dict) else "?"
        message = error.get("message", "") if isinstance(error, dict) else str(error)
        raise FetchError(
            f"ArcGIS error {code} {message!r} from {display_url(url)}; nothing was archived",
            source=self.name,
            hint=TOKEN_HINT if code in (498, 499) else None,
        )

    def ask(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        """GET the layer (path "") or its `/query`, parsed; an ArcGIS error answered as
        HTTP 200 is raised in one line naming its code and message."""
        url = self.url + path
        body = self.portal.get_json(url, self._params(params))
        if not isinstance(body, dict):
            raise BadPayloadError(
                f"ArcGIS answered a JSON {type(body).__name__}, not an object",
                source=self.name,
                payload=display_url(url),
            )
        if body.get("error") is not None:
            self._raise_error(url, body["error"])
        return body

    def query(self, **params: str) -> dict[str, Any]:
        return self.ask("/query", {"where": "1=1", **params})

    def get_page(self, params: dict[str, str]) -> tuple[bytes, str]:
        """A feature page's body and content type, as answered (not yet looked at)."""
        return self.portal.get(self.url + "/query", self._params({"where": "1=1", **params}))

    def read_page(
        self, answer: tuple[bytes, str], geojson: bool = False
    ) -> tuple[dict[str, Any], list[tuple[Any, str]]]:
        """A feature page (`get_page`'s answer): its members other than `features`
        (parsed) and each feature (parsed -- a GeoJSON one's type, id and properties
        only -- with its text as answered)."""
        body, content_type = answer
        head = body[:512].lstrip().lower()
        if "html" in content_type.lower() or head.startswith(b"<"):
            raise BadPayloadError(
                f"the server answered a query with an HTML page ({content_type or 'no type'}) "
                "instead of JSON -- a login, maintenance or error page?",
                source=self.name,
                payload=self.shown,
            )
        try:
            split = split_features(body) if geojson else None
            members, features = split or split_page(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise self.fail(f"a query answer is not a JSON object: {exc}") from exc
        if members.get("error") is not None:
            self._raise_error(self.url + "/query", members["error"])
        if features is None:
            raise self.fail("a query answer has no features list")
        return members, features


@dataclass
class Plan:
    oid: str
    size: int
    paginates: bool
    geojson: bool

    @property
    def query_format(self) -> str:
        return "geojson" if self.geojson else "json"

    @property
    def paging(self) -> str:
        return "offset" if self.paginates else "object-ids"


def object_id_field(session: Session, meta: dict[str, Any]) -> str:
    oid = meta.get("objectIdField")
    if isinstance(oid, str) and oid:
        return oid
    fields = meta.get("fields") or []
    for f in fields:
        if isinstance(f, dict) and f.get("type") == "esriFieldTypeOID":
            return str(f["name"])
    names = [f.get("name") for f in fields if isinstance(f, dict)]
    raise session.fail(
        f"the layer states no object-id field (objectIdField); fields present: {names}"
    )


def plan(session: Session, meta: dict[str, Any], page_size: int | None) -> Plan:
    oid = object_id_field(session, meta)
    max_count = meta.get("maxRecordCount")
    if not isinstance(max_count, int) or max_count <= 0:
        max_count = DEFAULT_MAX_RECORD_COUNT
    size = min(page_size, max_count) if page_size else max_count
    caps = meta.get("advancedQueryCapabilities") or {}
    paginates = bool(isinstance(caps, dict) and caps.get("supportsPagination"))
    formats = [f.strip().lower() for f in str(meta.get("supportedQueryFormats", "")).split(",")]
    version = meta.get("currentVersion")
    recent = (
        isinstance(version, int | float)
        and not isinstance(version, bool)
        and version >= GEOJSON_SINCE
    )
    return Plan(oid, size, paginates, bool(recent and "geojson" in formats))


def _esri_line(session: Session, plan: Plan, raw: Any) -> Line:
    if not isinstance(raw, dict):
        raise session.fail(f"a feature is a JSON {type(raw).__name__}, not an object")
    converted = arcgis2geojson(raw, plan.oid)
    props = converted.get("properties") or {}
    ident = props.get(plan.oid, converted.get("id"))
    feature = {
        "type": "Feature",
        "id": ident,
        "properties": props,
        "geometry": converted.get("geometry"),
    }
    return ident, json.dumps(feature, ensure_ascii=False, separators=(",", ":"))


def _geojson_line(session: Session, plan: Plan, raw: Any, text: str) -> Line:
    if not isinstance(raw, dict) or raw.get("type") != "Feature":
        raise session.fail("a GeoJSON page holds something other than a Feature")
    props = raw.get("properties")
    ident = props.get(plan.oid) if isinstance(props, dict) else None
    if ident is None:
        ident = raw.get("id")
    if "\n" in text or "\r" in text:  # one feature per line: re-written on one
        text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    return ident, text


# the names a GeoJSON 2008 `crs` member gives WGS84 longitude/latitude: OGC's CRS84
# (urn:ogc:def:crs:OGC:1.3:CRS84, OGC:CRS84, .../def/crs/OGC/1.3/CRS84) or EPSG 4326
# (EPSG:4326, urn:ogc:def:crs:EPSG::4326, .../def/crs/EPSG/0/4326), as servers write
# them with the axes in x=longitude order
WGS84_NAME = re.compile(
    r"(?:urn:ogc:def:crs:ogc:(?:1\.3)?:crs84|ogc:crs84|crs84|epsg:4326"
    r"|urn:ogc:def:crs:epsg:(?:[\d.]*:)?4326"
    r"|https?://www\.opengis\.net/def/crs/(?:ogc/1\.3/crs84|epsg/0/4326))",
    re.IGNORECASE,
)


def crs_name(crs: Any) -> str | None:
    """What a GeoJSON 2008 `crs` member names: `{"type": "name", "properties": {"name":
    N}}`, the older `{"type": "EPSG", "properties": {"code": C}}`; else None."""
    if not isinstance(crs, dict) or not isinstance(crs.get("properties"), dict):
        return None
    props = crs["properties"]
    kind = str(crs.get("type", "")).lower()
    if kind == "name" and isinstance(props.get("name"), str):
        return str(props["name"]).strip()
    if kind == "epsg" and props.get("code") is not None:
        return f"EPSG:{props['code']}"
    return None


def _check_geojson_crs(session: Session, crs: Any) -> None:
    """A GeoJSON page states a `crs` member (GeoJSON 2008; RFC 7946 dropped it) naming
    anything but WGS84 longitude/latitude: refused, as an Esri JSON page stating another
    spatialReference is. The archived sequence has no place for a CRS (GDAL reads it
    as WGS84), so metres would be taken for degrees."""
    if crs is None:
        return
    name = crs_name(crs)
    if name is not None and WGS84_NAME.fullmatch(name):
        return
    stated = name or json.dumps(crs, separators=(",", ":"))[:120]
    raise session.fail(
        f"asked for WGS84 (outSR={OUT_WKID}) the server answered a GeoJSON page whose crs "
        f"is {stated}: its coordinates are not longitude/latitude degrees; nothing was "
        "archived"
    )


def _params(plan: Plan, **params: str) -> dict[str, str]:
    return {"outFields": "*", "outSR": str(OUT_WKID), "f": plan.query_format, **params}


def _page(
    session: Session, plan: Plan, answer: tuple[bytes, str]
) -> tuple[list[Line], bool | None]:
    """The page's (object id, line) pairs and whether the server says more follow
    (None: it does not say -- GeoJSON before 11.x)."""
    members, features = session.read_page(answer, plan.geojson)
    if plan.geojson:
        _check_geojson_crs(session, members.get("crs"))
        props = members.get("properties")
        more = props.get("exceededTransferLimit") if isinstance(props, dict) else None
        lines = [_geojson_line(session, plan, raw, text) for raw, text in features]
        return lines, None if more is None else bool(more)
    sr = members.get("spatialReference")
    wkid = (sr.get("latestWkid") or sr.get("wkid")) if isinstance(sr, dict) else None
    if wkid is not None and wkid != OUT_WKID:
        raise session.fail(
            f"asked for WGS84 (outSR={OUT_WKID}) the server answered wkid {wkid}; "
            "nothing was archived"
        )
    lines = [_esri_line(session, plan, raw) for raw, _text in features]
    return lines, bool(members.get("exceededTransferLimit"))


def _by_offset(session: Session, plan: Plan, counted: int) -> Generator[list[Line], None, None]:
    def ask(offset: int) -> tuple[bytes, str]:
        params = _params(
            plan,
            orderByFields=plan.oid,
            resultOffset=str(offset),
            resultRecordCount=str(plan.size),
        )
        return session.get_page(params)

    ahead = PagesAhead(ask, plan.size, counted)
    try:
        offset = 0
        while True:
            answer = ahead.take(offset)
            features, more = _page(session, plan, answer)
            yield features
            if more is None:  # not stated: a full page may be followed by more
                more = len(features) >= plan.size
            if not more:
                return
            if not features:
                raise session.fail(
                    f"the server says more features follow offset {offset} but answered none"
                )
            offset += len(features)
    finally:
        ahead.close()


def _by_ids(session: Session, plan: Plan, counted: int) -> Generator[list[Line], None, None]:
    ids = session.query(returnIdsOnly="true", f="json").get("objectIds") or []
    if not isinstance(ids, list):
        raise session.fail("returnIdsOnly answered no objectIds list")
    ids = sorted(ids)
    for i in range(0, len(ids), plan.size):
        batch = ids[i : i + plan.size]
        params = _params(plan, objectIds=",".join(str(x) for x in batch))
        features, _more = _page(session, plan, session.get_page(params))
        missing = sorted(set(batch) - {ident for ident, _f in features})
        if missing:
            raise session.fail(
                f"object id(s) {missing[:10]} were asked for by id but not answered "
                f"(a maxRecordCount below the stated {plan.size}?); nothing was archived"
            )
        yield features


def _checked(
    session: Session,
    plan: Plan,
    counted: int,
    answered: Iterator[list[Line]],
    sink: PageSink | None,
) -> list[str]:
    """The lines of `answered` (page by page), each object id once, within
    max_payload_bytes (and at most one past `counted`); each page's lines handed to
    `sink` once checked."""
    seen: set[Any] = set()
    lines: list[str] = []
    size = 0
    limit = session.portal.src.max_payload_bytes
    for page in answered:
        start = len(lines)
        for ident, line in page:
            if ident in seen:
                how = (
                    "a page repeated an earlier one: does the server ignore resultOffset?"
                    if plan.paginates
                    else "in two id batches"
                )
                raise session.fail(
                    f"object id {ident} was answered twice ({how}); the layer cannot be "
                    "downloaded consistently, nothing was archived"
                )
            seen.add(ident)
            size += len(line) + 1
            if size > limit:
                raise too_large(session.portal.src, session.shown)
            lines.append(line)
            if len(lines) > counted:
                return lines
        if sink is not None:
            sink.page(lines[start:])
    return lines


def download(session: Session, plan: Plan, sink: PageSink | None = None) -> tuple[list[str], int]:
    """Every feature once as a GeoJSON line, ordered by object id, checked against
    returnCountOnly; the lines are bounded by the source's max_payload_bytes. Each
    page's lines also go to `sink` (if any) as they are checked."""
    counted = session.query(returnCountOnly="true", f="json").get("count")
    if not isinstance(counted, int):
        raise session.fail("returnCountOnly answered no count")
    pages = _by_offset if plan.paginates else _by_ids
    with contextlib.closing(pages(session, plan, counted)) as answered:
        # closed here even when left early: no page is still being asked ahead after
        lines = _checked(session, plan, counted, answered, sink)
    if len(lines) != counted:
        raise session.fail(
            f"the pages held {len(lines)} feature(s) but returnCountOnly said {counted}: "
            "object ids are missing or extra; nothing was archived"
        )
    return lines, counted
