"""The ArcGIS REST fetcher: a FeatureServer or MapServer layer
(`https://HOST/arcgis/rest/services/NAME/FeatureServer/0`) as one GeoJSON sequence.

Not yet a connector of `source add` (the geo reader that ingests its payload is not
wired); `fetch_layer` is the building block. It reads the layer's metadata (`?f=json`);
the publisher date is `editingInfo.dataLastEditDate`, else `editingInfo.lastEditDate`,
else the HTTP `Last-Modified` of that answer. When that date is not after `since_ms`
(the watermark) no query is sent at all. Otherwise the features are paged ordered by
the object-id field in pages of at most `maxRecordCount`:

- `f=geojson` where the collection states `properties.exceededTransferLimit` (11.x with
  pagination and geoJSON in `supportedQueryFormats`): a 10.x GeoJSON page does not say
  whether more features follow, so a page the server capped below the asked size could
  not be told from the last one;
- Esri JSON with `resultOffset`/`resultRecordCount`, converted with `arcgis2geojson`,
  where the layer supports pagination;
- `returnIdsOnly`, then features by `objectIds` batches, where it does not (10.3).

The total is checked against `returnCountOnly`, and no object id may be missing or
repeated (a server that ignores `resultOffset` answers the first page again: caught,
never looped on). The layer's date is read again after the last page; a layer
republished meanwhile is downloaded again once, and a second republish fails. Errors
that ArcGIS answers with HTTP 200 (`{"error": {"code", "message"}}`) fail in one line
naming both. HTTP, 429/5xx retries, the size limit and the deadline are `portal.Portal`'s.
The token is sent as the `token` parameter and appears in no message or metadata, and
is masked in httpx's request log (`redact.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from arcgis2geojson import arcgis2geojson

from feedledger.model.errors import BadPayloadError, ConfigError, FeedledgerError
from feedledger.model.source import (
    DEFAULT_FETCH_DEADLINE_S,
    DEFAULT_MAX_PAYLOAD_BYTES,
    SourceConfig,
)
from feedledger.model.timeutil import iso
from feedledger.sources.http import _http_date, _too_large, display_url
from feedledger.sources.portal import Portal, Sleep
from feedledger.sources.redact import redacted

CONTENT_TYPE = "application/geo+json-seq"  # one GeoJSON Feature per line
DEFAULT_MAX_RECORD_COUNT = 1000  # Esri's default when a layer does not state one
TOKEN_HINT = "check the token (ArcGIS 498: invalid or expired, 499: required)"


@dataclass(frozen=True)
class Layer:
    """A fetched layer: `data` is the GeoJSON sequence (None: nothing new, the layer's
    date is not after the watermark and no feature was asked for), `published_ms` the
    publisher date (epoch ms) and `metadata` what the payload's sidecar records."""

    data: bytes | None
    published_ms: int
    metadata: dict[str, Any] = field(default_factory=dict)
    content_type: str = CONTENT_TYPE

    @property
    def nothing_new(self) -> bool:
        return self.data is None

    @property
    def published_at(self) -> int:
        """The publisher date as us UTC (the ledger's unit)."""
        return self.published_ms * 1000


@dataclass
class _Session:
    portal: Portal
    url: str
    token: str | None

    @property
    def name(self) -> str:
        return self.portal.src.name

    @property
    def shown(self) -> str:
        return display_url(self.url)

    def ask(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        """GET the layer (path "") or its `/query`; an ArcGIS error answered as HTTP 200
        is raised in one line naming its code and message."""
        url = self.url + path
        if self.token is not None:
            params = {**params, "token": self.token}
        body = self.portal.get_json(url, params)
        if not isinstance(body, dict):
            raise BadPayloadError(
                f"ArcGIS answered a JSON {type(body).__name__}, not an object",
                source=self.name,
                payload=display_url(url),
            )
        error = body.get("error")
        if error is not None:
            code = error.get("code", "?") if isinstance(error, dict) else "?"
            message = error.get("message", "") if isinstance(error, dict) else str(error)
            raise FeedledgerError(
                f"ArcGIS error {code} {message!r} from {display_url(url)}; nothing was archived",
                source=self.name,
                hint=TOKEN_HINT if code in (498, 499) else None,
            )
        return body

    def query(self, **params: str) -> dict[str, Any]:
        return self.ask("/query", {"where": "1=1", **params})


def _layer_date(session: _Session, meta: dict[str, Any]) -> int:
    """The publisher date (epoch ms) from the metadata just read."""
    info = meta.get("editingInfo")
    if isinstance(info, dict):
        for key in ("dataLastEditDate", "lastEditDate"):
            value = info.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value)
    header = session.portal.last_headers.get("last-modified")
    if header:
        try:
            return _http_date(header, "UTC") // 1000
        except ConfigError as exc:
            raise BadPayloadError(
                f"cannot parse the layer's Last-Modified header {header!r} as a date",
                source=session.name,
                payload=session.shown,
            ) from exc
    raise BadPayloadError(
        "the layer has no editingInfo.dataLastEditDate, no editingInfo.lastEditDate and "
        "no Last-Modified header, so its publication time is unknown",
        source=session.name,
        payload=session.shown,
        hint="date it another way with --published-from (e.g. field:NAME)",
    )


def _metadata(session: _Session) -> tuple[dict[str, Any], int]:
    meta = session.ask("", {"f": "json"})
    return meta, _layer_date(session, meta)


def _object_id_field(session: _Session, meta: dict[str, Any]) -> str:
    oid = meta.get("objectIdField")
    if isinstance(oid, str) and oid:
        return oid
    fields = meta.get("fields") or []
    for f in fields:
        if isinstance(f, dict) and f.get("type") == "esriFieldTypeOID":
            return str(f["name"])
    names = [f.get("name") for f in fields if isinstance(f, dict)]
    raise BadPayloadError(
        f"the layer states no object-id field (objectIdField); fields present: {names}",
        source=session.name,
        payload=session.shown,
    )


def _wkid(meta: dict[str, Any]) -> int | None:
    for holder in (meta.get("sourceSpatialReference"), (meta.get("extent") or {})):
        sr = holder.get("spatialReference", holder) if isinstance(holder, dict) else None
        if isinstance(sr, dict):
            wkid = sr.get("latestWkid") or sr.get("wkid")
            if isinstance(wkid, int):
                return wkid
    return None


@dataclass
class _Plan:
    oid: str
    size: int
    paginates: bool
    geojson: bool


def _plan(session: _Session, meta: dict[str, Any], page_size: int | None) -> _Plan:
    oid = _object_id_field(session, meta)
    max_count = meta.get("maxRecordCount")
    if not isinstance(max_count, int) or max_count <= 0:
        max_count = DEFAULT_MAX_RECORD_COUNT
    size = min(page_size, max_count) if page_size else max_count
    caps = meta.get("advancedQueryCapabilities") or {}
    paginates = bool(isinstance(caps, dict) and caps.get("supportsPagination"))
    formats = str(meta.get("supportedQueryFormats", "")).lower()
    version = meta.get("currentVersion")
    modern = isinstance(version, int | float) and version >= 11
    return _Plan(oid, size, paginates, paginates and modern and "geojson" in formats)


def _feature(oid: str, raw: dict[str, Any], geojson: bool) -> tuple[Any, dict[str, Any]]:
    """(object id, GeoJSON Feature) of one answered feature, in one member order."""
    converted = raw if geojson else arcgis2geojson(raw, oid)
    props = converted.get("properties") or {}
    ident = props.get(oid, converted.get("id"))
    return ident, {
        "type": "Feature",
        "id": ident,
        "properties": props,
        "geometry": converted.get("geometry"),
    }


def _page(
    session: _Session, plan: _Plan, answer: dict[str, Any]
) -> tuple[list[tuple[Any, dict[str, Any]]], bool]:
    """The page's (object id, feature) pairs and whether the server says more follow."""
    raw = answer.get("features")
    if not isinstance(raw, list):
        raise BadPayloadError(
            "a query answer has no features list",
            source=session.name,
            payload=session.shown,
        )
    if plan.geojson:
        props = answer.get("properties") or {}
        more = bool(isinstance(props, dict) and props.get("exceededTransferLimit"))
    else:
        more = bool(answer.get("exceededTransferLimit"))
    return [_feature(plan.oid, f, plan.geojson) for f in raw if isinstance(f, dict)], more


def _repeated(session: _Session, ident: Any, how: str) -> FeedledgerError:
    return BadPayloadError(
        f"object id {ident} was answered twice ({how}); the layer cannot be downloaded "
        "consistently, nothing was archived",
        source=session.name,
        payload=session.shown,
    )


def _by_offset(session: _Session, plan: _Plan) -> Iterator[tuple[Any, dict[str, Any]]]:
    fmt = "geojson" if plan.geojson else "json"
    offset = 0
    while True:
        answer = session.query(
            outFields="*",
            orderByFields=plan.oid,
            resultOffset=str(offset),
            resultRecordCount=str(plan.size),
            f=fmt,
        )
        features, more = _page(session, plan, answer)
        yield from features
        if not more:
            return
        if not features:
            raise BadPayloadError(
                f"the server says more features follow offset {offset} but answered none",
                source=session.name,
                payload=session.shown,
            )
        offset += len(features)


def _by_ids(session: _Session, plan: _Plan) -> Iterator[tuple[Any, dict[str, Any]]]:
    answer = session.query(returnIdsOnly="true", f="json")
    ids = answer.get("objectIds") or []
    if not isinstance(ids, list):
        raise BadPayloadError(
            "returnIdsOnly answered no objectIds list", source=session.name, payload=session.shown
        )
    ids = sorted(ids)
    for i in range(0, len(ids), plan.size):
        batch = ids[i : i + plan.size]
        answer = session.query(objectIds=",".join(str(x) for x in batch), outFields="*", f="json")
        features, _more = _page(session, plan, answer)
        missing = sorted(set(batch) - {ident for ident, _f in features})
        if missing:
            raise BadPayloadError(
                f"object id(s) {missing[:10]} were asked for by id but not answered "
                f"(a maxRecordCount below the stated {plan.size}?); nothing was archived",
                source=session.name,
                payload=session.shown,
            )
        yield from features


def _download(session: _Session, plan: _Plan) -> tuple[list[str], int]:
    """Every feature once as a GeoJSON line, ordered by object id, checked against
    returnCountOnly; the lines are bounded by the source's max_payload_bytes."""
    counted = session.query(returnCountOnly="true", f="json").get("count")
    if not isinstance(counted, int):
        raise BadPayloadError(
            "returnCountOnly answered no count", source=session.name, payload=session.shown
        )
    pages = _by_offset if plan.paginates else _by_ids
    seen: set[Any] = set()
    features: list[str] = []
    size = 0
    how = "a page repeated an earlier one: does the server ignore resultOffset?"
    for ident, feature in pages(session, plan):
        if ident in seen:
            raise _repeated(session, ident, how if plan.paginates else "in two id batches")
        seen.add(ident)
        line = json.dumps(feature, ensure_ascii=False, separators=(",", ":")) + "\n"
        size += len(line)
        if size > session.portal.src.max_payload_bytes:
            raise _too_large(session.portal.src, session.shown)
        features.append(line)
        if len(features) > counted:
            break
    if len(features) != counted:
        raise BadPayloadError(
            f"the pages held {len(features)} feature(s) but returnCountOnly said {counted}: "
            "object ids are missing or extra; nothing was archived",
            source=session.name,
            payload=session.shown,
        )
    return features, counted


def _sidecar(meta: dict[str, Any], plan: _Plan, count: int, url: str) -> dict[str, Any]:
    return {
        "url": display_url(url),
        "name": meta.get("name"),
        "type": meta.get("type"),
        "geometry_type": meta.get("geometryType"),
        "server_version": meta.get("currentVersion"),
        "editing_info": meta.get("editingInfo"),
        "fields": meta.get("fields"),
        "object_id_field": plan.oid,
        "count": count,
        "wkid": _wkid(meta),
        "max_record_count": meta.get("maxRecordCount"),
        "query_format": "geojson" if plan.geojson else "json",
        "paging": "offset" if plan.paginates else "object-ids",
    }


def fetch_layer(
    url: str,
    *,
    token: str | None = None,
    page_size: int | None = None,
    since_ms: int | None = None,
    name: str = "arcgis",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    fetch_deadline_s: float = DEFAULT_FETCH_DEADLINE_S,
    client: httpx.Client | None = None,
    sleep: Sleep | None = None,
) -> Layer:
    """Every feature of the layer at `url` as a GeoJSON sequence, dated by the layer.
    When the layer's date is not after `since_ms` (epoch ms), a Layer without data and
    no query sent. `name` names the source in errors; the limits are a source's."""
    base = url.strip().rstrip("/")
    if "?" in base:
        base = base.split("?", 1)[0]
    src = SourceConfig(
        name=name,
        key=("_",),
        max_payload_bytes=max_payload_bytes,
        fetch_deadline_s=fetch_deadline_s,
    )
    with redacted(token), Portal(src, client=client, sleep=sleep) as portal:
        session = _Session(portal, base, token)
        meta, before = _metadata(session)
        if since_ms is not None and before <= since_ms:
            return Layer(data=None, published_ms=before, metadata=_sidecar_light(meta, base))
        plan = _plan(session, meta, page_size)
        for attempt in (1, 2):
            features, count = _download(session, plan)
            meta_after, after = _metadata(session)
            if after == before:
                break
            if attempt == 2:
                raise FeedledgerError(
                    f"the layer was republished while it was downloaded, twice (edit date "
                    f"{iso(before * 1000)} then {iso(after * 1000)}); the pages were "
                    "discarded and nothing was archived",
                    source=name,
                    payload=session.shown,
                    hint="run again once the publisher has finished updating it",
                )
            meta, before = meta_after, after
            plan = _plan(session, meta, page_size)
    data = "".join(features).encode("utf-8")
    return Layer(data=data, published_ms=before, metadata=_sidecar(meta, plan, count, base))


def _sidecar_light(meta: dict[str, Any], url: str) -> dict[str, Any]:
    return {
        "url": display_url(url),
        "server_version": meta.get("currentVersion"),
        "editing_info": meta.get("editingInfo"),
    }
