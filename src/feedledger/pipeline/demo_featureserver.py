"""The demo's own FeatureServer: one polygon layer answered the way an ArcGIS Server /
ArcGIS Online 11.x feature layer answers (Esri's ArcGIS REST API reference, "Feature
Layer" and "Query (Feature Service/Layer)"), on 127.0.0.1 in a thread, for `feedledger
demo` only (the tests have their own, fuller fake in tests/fakes/arcgis.py).

- `GET .../Zoning/FeatureServer/0?f=json`: `currentVersion` 11.1, `editingInfo`
  {`lastEditDate`, `schemaLastEditDate`, `dataLastEditDate`} in epoch milliseconds,
  `objectIdField`, `fields`, `maxRecordCount`, `supportedQueryFormats` "JSON, geoJSON, PBF",
  `advancedQueryCapabilities.supportsPagination`, the spatial reference (WGS84, 4326).
- `GET .../0/query?where=1=1`: `returnCountOnly` -> {"count"}; `returnIdsOnly` ->
  {"objectIdFieldName", "objectIds"}; `objectIds=1,2`; `resultOffset`/`resultRecordCount`
  (capped at maxRecordCount) ordered by OBJECTID; `f=geojson` (counter-clockwise outer
  rings, `properties.exceededTransferLimit`) or `f=json` (Esri JSON: clockwise `rings`,
  `exceededTransferLimit` only when more follow). `outSR` other than 4326 is refused.
- Errors are HTTP 200 with {"error": {"code", "message", "details"}}, as ArcGIS answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LAYER_PATH = "/arcgis/rest/services/Zoning/FeatureServer/0"
WGS84 = {"wkid": 4326, "latestWkid": 4326}
FIELDS: list[dict[str, Any]] = [
    {"name": "OBJECTID", "type": "esriFieldTypeOID", "alias": "OBJECTID"},
    {"name": "PARCEL_ID", "type": "esriFieldTypeString", "alias": "Parcel ID", "length": 16},
    {"name": "ZONE", "type": "esriFieldTypeString", "alias": "Zoning district", "length": 8},
    {"name": "ACRES", "type": "esriFieldTypeDouble", "alias": "Acres"},
]

Ring = list[list[float]]


@dataclass
class Feature:
    """One feature as the layer stores it: attributes and its polygon's outer ring,
    clockwise and closed (Esri's orientation)."""

    attributes: dict[str, Any]
    ring: Ring


@dataclass
class Layer:
    """What the server answers: `features` and `edit_date` (epoch ms) may be changed
    between requests (a new publication)."""

    features: list[Feature]
    edit_date: int
    max_record_count: int = 4
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # in order

    def answer(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        self.requests.append((path, query))
        if path.rstrip("/") == LAYER_PATH:
            return self.metadata()
        if path != f"{LAYER_PATH}/query":
            return _error(400, "Requested operation is not supported by this service.")
        if query.get("where", "1=1").replace(" ", "") != "1=1":
            return _error(400, "Unable to complete operation: unsupported where clause.")
        if query.get("outSR", "4326") not in ("4326", '{"wkid":4326}'):
            return _error(400, "Invalid or missing input parameters: outSR.")
        chosen = sorted(self.features, key=lambda f: int(f.attributes["OBJECTID"]))
        if "objectIds" in query:
            wanted = {int(i) for i in query["objectIds"].split(",") if i.strip()}
            chosen = [f for f in chosen if f.attributes["OBJECTID"] in wanted]
        if query.get("returnCountOnly") == "true":
            return {"count": len(chosen)}
        if query.get("returnIdsOnly") == "true":
            return {
                "objectIdFieldName": "OBJECTID",
                "objectIds": [f.attributes["OBJECTID"] for f in chosen],
            }
        offset = int(query.get("resultOffset", "0"))
        count = min(
            int(query.get("resultRecordCount", self.max_record_count)), self.max_record_count
        )
        page, more = chosen[offset : offset + count], offset + count < len(chosen)
        fmt = query.get("f", "html")
        if fmt == "geojson":
            return {
                "type": "FeatureCollection",
                "features": [_geojson(f) for f in page],
                "properties": {"exceededTransferLimit": more},
            }
        if fmt not in ("json", "pjson"):
            return _error(400, f"Invalid or missing input parameters: f={fmt}.")
        body: dict[str, Any] = {
            "objectIdFieldName": "OBJECTID",
            "geometryType": "esriGeometryPolygon",
            "spatialReference": WGS84,
            "fields": FIELDS,
            "features": [
                {"attributes": dict(f.attributes), "geometry": {"rings": [f.ring]}} for f in page
            ],
        }
        if more:
            body["exceededTransferLimit"] = True
        return body

    def metadata(self) -> dict[str, Any]:
        xs = [x for f in self.features for x, _y in f.ring] or [0.0]
        ys = [y for f in self.features for _x, y in f.ring] or [0.0]
        extent = {"xmin": min(xs), "ymin": min(ys), "xmax": max(xs), "ymax": max(ys)}
        return {
            "currentVersion": 11.1,
            "id": 0,
            "name": "Zoning",
            "type": "Feature Layer",
            "geometryType": "esriGeometryPolygon",
            "objectIdField": "OBJECTID",
            "fields": FIELDS,
            "maxRecordCount": self.max_record_count,
            "supportedQueryFormats": "JSON, geoJSON, PBF",
            "advancedQueryCapabilities": {"supportsPagination": True, "supportsOrderBy": True},
            "capabilities": "Query",
            "editingInfo": {
                "lastEditDate": self.edit_date,
                "schemaLastEditDate": self.edit_date,
                "dataLastEditDate": self.edit_date,
            },
            "extent": {**extent, "spatialReference": WGS84},
            "sourceSpatialReference": WGS84,
        }


def _geojson(f: Feature) -> dict[str, Any]:
    return {
        "type": "Feature",
        "id": f.attributes["OBJECTID"],
        "geometry": {"type": "Polygon", "coordinates": [f.ring[::-1]]},  # RFC 7946: CCW
        "properties": dict(f.attributes),
    }


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": []}}


@contextmanager
def serving(layer: Layer) -> Iterator[str]:
    """Serve `layer` on 127.0.0.1 (a free port) until the block ends; yields its URL."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            with lock:
                body = json.dumps(layer.answer(parts.path, query)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.05,), name="demo-featureserver", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{LAYER_PATH}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
