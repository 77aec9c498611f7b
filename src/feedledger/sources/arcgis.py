"""The ArcGIS REST connector: a FeatureServer or MapServer layer
(`fetch = https://HOST/arcgis/rest/services/NAME/FeatureServer/0`) as one GeoJSON sequence.

`source add NAME --connector arcgis --fetch URL --key FIELD [--token-env VAR]` (format
`geojsonseq`, set by config.make_source); `run` and the scheduler fetch through
`fetch_arcgis` (sources/dispatch.py). It reads the layer's metadata (`?f=json`); the
publisher date is `editingInfo.dataLastEditDate`, else `editingInfo.lastEditDate`, else
the HTTP `Last-Modified` of that answer. When that date is not after the watermark no
query is sent at all ("nothing new"). Otherwise every feature is downloaded, ordered by
the object-id field (`arcgis_query.py`: pagination, f=geojson or Esri JSON, the count
and object-id checks), and the layer's date is read again after the last page: a layer
republished meanwhile is downloaded again once, and a second republish fails with
nothing archived.

`--published-from field:NAME` dates each payload by that field of the features instead
(the ingest reads it; for a layer stating no date at all); every run then downloads the
layer, as the watermark cannot be compared before the features are read.

CRS: GeoJSON (RFC 7946) has no CRS member and GDAL reads a GeoJSON sequence as WGS84,
so every query asks the server for `outSR=4326`: the archived layer is always WGS84
(its CRS as read is EPSG:4326, whatever the layer's own spatial reference), and the
layer's native wkid is recorded in the payload's sidecar. `--geometry-grid` is then in
degrees (the default 1e-9 degree is about 0.1 mm).

The payload is ONE file, the whole layer as a GeoJSON sequence (one Feature per line,
each as the server wrote it on the f=geojson path); its sidecar records the layer
metadata (name, server version, editingInfo, fields, object-id field, count, native
wkid, maxRecordCount, query format, paging), so `replay` and `archive reindex` need
nothing but the archive. Errors ArcGIS answers with HTTP 200 fail in one line naming
code and message; HTTP, 429/5xx retries, the size limit and the deadline are
`portal.Portal`'s. The token (`--token-env VAR`: read from the environment at run
time, never stored) is sent as the `token` parameter and appears in no message,
sidecar or output, and is masked in httpx's request log (`redact.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from feedledger.model.errors import BadPayloadError, ConfigError, FetchError
from feedledger.model.source import (
    DEFAULT_FETCH_DEADLINE_S,
    DEFAULT_MAX_PAYLOAD_BYTES,
    SourceConfig,
)
from feedledger.model.timeutil import epoch_us, iso
from feedledger.sources.arcgis_query import OUT_WKID, PageSink, Plan, Session, download, plan
from feedledger.sources.dated import Fetched
from feedledger.sources.http import display_url, http_date
from feedledger.sources.portal import Portal, Sleep, nothing_new, stated
from feedledger.sources.redact import redacted

CONTENT_TYPE = "application/geo+json-seq"  # one GeoJSON Feature per line


@dataclass(frozen=True)
class Layer:
    """A fetched layer: `data` is the GeoJSON sequence (None: nothing new, the layer's
    date is not after the watermark and no feature was asked for), `published_ms` the
    publisher date (epoch ms; None: the source dates its payloads by a field, and the
    layer states no date) and `metadata` what the payload's sidecar records."""

    data: bytes | None
    published_ms: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    content_type: str = CONTENT_TYPE

    @property
    def nothing_new(self) -> bool:
        return self.data is None

    @property
    def published_at(self) -> int | None:
        """The publisher date as us UTC (the ledger's unit)."""
        return None if self.published_ms is None else self.published_ms * 1000


def _layer_date(session: Session, meta: dict[str, Any]) -> int | None:
    """The publisher date (epoch ms) from the metadata just read; None where the layer
    states none and the source dates its payloads by a field (`field:NAME`)."""
    info = meta.get("editingInfo")
    if isinstance(info, dict):
        for key in ("dataLastEditDate", "lastEditDate"):
            value = info.get(key)
            if value is None:
                continue
            # NaN, 1e20, "yesterday", true...: stated, but no instant at all
            us = epoch_us(value, 1_000)
            if us is None:
                raise BadPayloadError(
                    f"the layer's editingInfo.{key} {stated(value)} is not a date (epoch "
                    "milliseconds between the years 1 and 9999); nothing was archived",
                    source=session.name,
                    payload=session.shown,
                )
            return us // 1_000
    header = session.portal.last_headers.get("last-modified")
    if header:
        try:
            return http_date(header, "UTC") // 1000
        except ConfigError as exc:
            raise BadPayloadError(
                f"cannot parse the layer's Last-Modified header {header!r} as a date",
                source=session.name,
                payload=session.shown,
            ) from exc
    if session.portal.src.published_from.field is not None:
        return None
    raise BadPayloadError(
        "the layer has no editingInfo.dataLastEditDate, no editingInfo.lastEditDate and "
        "no Last-Modified header, so its publication time is unknown",
        source=session.name,
        payload=session.shown,
        hint="date it by a field every feature states: --published-from field:NAME "
        "(source add ... --replace)",
    )


def _metadata(session: Session) -> tuple[dict[str, Any], int | None]:
    meta = session.ask("", {"f": "json"})
    return meta, _layer_date(session, meta)


def _wkid(meta: dict[str, Any]) -> int | None:
    for holder in (meta.get("sourceSpatialReference"), (meta.get("extent") or {})):
        sr = holder.get("spatialReference", holder) if isinstance(holder, dict) else None
        if isinstance(sr, dict):
            wkid = sr.get("latestWkid") or sr.get("wkid")
            if isinstance(wkid, int):
                return wkid
    return None


def _shown(ms: int | None) -> str:
    return "none" if ms is None else str(iso(ms * 1000))


def _sidecar(meta: dict[str, Any], plan: Plan, count: int, url: str) -> dict[str, Any]:
    return {
        "connector": "arcgis",
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
        "out_wkid": OUT_WKID,
        "max_record_count": meta.get("maxRecordCount"),
        "page_size": plan.size,
        "query_format": plan.query_format,
        "paging": plan.paging,
    }


def _sidecar_light(meta: dict[str, Any], url: str) -> dict[str, Any]:
    return {
        "connector": "arcgis",
        "url": display_url(url),
        "server_version": meta.get("currentVersion"),
        "editing_info": meta.get("editingInfo"),
    }


def _layer(
    src: SourceConfig,
    url: str,
    *,
    token: str | None,
    since_ms: int | None,
    page_size: int | None = None,
    client: httpx.Client | None,
    sleep: Sleep | None,
    sink: PageSink | None = None,
) -> Layer:
    base = url.strip().rstrip("/")
    if "?" in base:
        base = base.split("?", 1)[0]
    with redacted(token), Portal(src, client=client, sleep=sleep) as portal:
        session = Session(portal, base, token)
        meta, before = _metadata(session)
        # dated by a field (field:NAME): the features' dates are known only once read,
        # so the watermark cannot be compared before downloading
        by_field = src.published_from.field is not None
        if since_ms is not None and before is not None and not by_field and before <= since_ms:
            return Layer(data=None, published_ms=before, metadata=_sidecar_light(meta, base))
        how = plan(session, meta, page_size)
        for attempt in (1, 2):
            if sink is not None:
                sink.restart()
            lines, count = download(session, how, sink)
            meta_after, after = _metadata(session)
            if after == before:
                break
            if attempt == 2:
                raise FetchError(
                    f"the layer was republished while it was downloaded, twice (edit date "
                    f"{_shown(before)} then {_shown(after)}); the pages were "
                    "discarded and nothing was archived",
                    source=src.name,
                    payload=session.shown,
                    hint="run again once the publisher has finished updating it",
                )
            meta, before = meta_after, after
            how = plan(session, meta, page_size)
    lines.append("")  # the last line ends with a newline too
    # the features' texts freed as soon as they are joined: two copies of the layer at
    # most (the text, then its bytes), never three
    text = "\n".join(lines)
    lines.clear()
    data = text.encode("utf-8")
    del text
    published = None if by_field else before
    return Layer(data=data, published_ms=published, metadata=_sidecar(meta, how, count, base))


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
    src = SourceConfig(
        name=name,
        key=("_",),
        max_payload_bytes=max_payload_bytes,
        fetch_deadline_s=fetch_deadline_s,
    )
    return _layer(
        src, url, token=token, since_ms=since_ms, page_size=page_size, client=client, sleep=sleep
    )


def token_of(src: SourceConfig) -> str | None:
    """The token from the environment variable `--token-env` names (None: no token).
    Unset or empty at run time: a ConfigError naming the variable, never a value."""
    if src.token_env is None:
        return None
    token = os.environ.get(src.token_env, "").strip()
    if not token:
        raise ConfigError(
            f"environment variable {src.token_env} (--token-env) is not set or empty, so "
            "there is no token for the ArcGIS service; nothing was fetched",
            source=src.name,
            hint=f"export {src.token_env}=<token> in the environment of feedledger run "
            "and the scheduler",
        )
    return token


def fetch_arcgis(
    src: SourceConfig,
    *,
    watermark: int | None = None,
    client: httpx.Client | None = None,
    sleep: Sleep | None = None,
    sink: PageSink | None = None,
) -> Fetched:
    """The whole layer as one GeoJSON sequence, dated by the layer's edit date, its
    metadata for the sidecar. When that date is not after `watermark` (us UTC),
    StaleWatermarkError before any feature is asked for ("nothing new"). `sink` (if
    any) is handed each page's lines as they arrive (arcgis_query.PageSink)."""
    url = (src.fetch or "").strip()
    token = token_of(src)
    since_ms = None if watermark is None else watermark // 1000
    layer = _layer(src, url, token=token, since_ms=since_ms, client=client, sleep=sleep, sink=sink)
    if layer.data is None:
        assert watermark is not None and layer.published_at is not None
        raise nothing_new(src, "the layer's edit date", layer.published_at, watermark)
    return Fetched(
        data=layer.data,
        published_at=layer.published_at,
        original_name=display_url(url.rstrip("/")),
        content_type=layer.content_type,
        metadata=layer.metadata,
    )
