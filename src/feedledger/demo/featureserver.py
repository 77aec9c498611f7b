"""A fake ArcGIS REST server: one layer, as a FeatureServer and a MapServer, answered
the way ArcGIS Server / ArcGIS Online answer, on 127.0.0.1 in a thread. The one fake
FeatureServer of the project: `feedledger demo` serves its zoning layer with it
(demo/zoning.py) and the tests drive every knob below (tests/fakes/arcgis.py adds only
the pytest fixture `arcgis`). Three flavours: "10.3" (no pagination), "10.8" (Esri JSON
paging) and "11.1" (GeoJSON paging; the default, and the demo's).

Shapes, from Esri's ArcGIS REST API reference (developers.arcgis.com/rest/services-reference,
"Feature Layer", "Query (Feature Service/Layer)", "Error handling") and live layers such as
services*.arcgis.com/.../FeatureServer/0?f=pjson:

- Layer metadata, `GET .../FeatureServer/0?f=json` (also `.../MapServer/0`): `currentVersion`
  (number), `type` "Feature Layer", `editingInfo` {`lastEditDate`, `schemaLastEditDate`,
  `dataLastEditDate`} in epoch milliseconds (10.3 layers carry only `lastEditDate`),
  `maxRecordCount`, `supportedQueryFormats` ("JSON, AMF" at 10.3, "JSON, geoJSON, PBF"
  later), `advancedQueryCapabilities.supportsPagination` (false at 10.3), `objectIdField`,
  `fields` [{name, type "esriFieldType…", alias}], `extent.spatialReference` and
  `sourceSpatialReference` ({`wkid`, `latestWkid`}).
- `GET .../0/query` with `where`, `outFields`, `orderByFields`, `resultOffset`,
  `resultRecordCount`, `returnCountOnly` (answers {"count": n}), `returnIdsOnly` (answers
  {"objectIdFieldName", "objectIds"}; never capped by maxRecordCount), `objectIds`
  (comma-separated), `f=json|geojson`, `token`; the fake accepts only `where=1=1`.
  Esri JSON (`f=json`): {objectIdFieldName, geometryType "esriGeometryPolygon",
  spatialReference, fields, features: [{attributes, geometry: {rings}}]} and
  `exceededTransferLimit: true` only when more features match than were returned (Esri
  omits it otherwise). Outer rings are clockwise (Esri's "Geometry objects" page).
  Pages (`resultOffset`/`resultRecordCount`, the count capped at maxRecordCount) are in
  OBJECTID order.
  GeoJSON (`f=geojson`, RFC 7946 counter-clockwise outer rings; simplification: the fake
  keeps the layer's own coordinates where a real server reprojects to WGS84 unless `outSR`
  is given): a FeatureCollection whose features carry `id` (the object
  id), `properties` and `geometry`. `outSR=4326` (either format) answers WGS84 degrees:
  the fake's stand-in projection is the affine map `to_wgs84` (not the real State Plane
  transform; what matters is that degrees come back, and an Esri JSON answer states
  `spatialReference` 4326; a layer stored in WGS84, as the demo's, is answered as
  stored); another `outSR` than the layer's own or 4326 is refused. At 11.x the
  collection has
  `properties.exceededTransferLimit`, at 10.8 it has no such member (a client cannot page
  GeoJSON reliably there, so it pages Esri JSON).
  Without pagination (10.3) `resultOffset`/`resultRecordCount` are ignored, as an old server
  ignores unknown parameters: every page is the first `maxRecordCount` features; clients fetch
  `returnIdsOnly` then features by `objectIds` batches.
- Errors are answered with HTTP 200 and {"error": {"code", "message", "details"}}, e.g.
  498 "Invalid token." for a wrong token and 499 "Token Required." for none.

Knobs (attributes of `FakeArcGIS`, each may be changed between requests): `features` (see
`parcels()`; a feature is {"attributes": {...}, "rings": [ring, ...]}), `fields`,
`edit_date`, `schema_edit_date` (None: the data's `edit_date`), `max_record_count`, `wkid`
(the layer's spatial reference), `extent` (xmin, ymin, xmax, ymax; None: the features'
bounding box), `token` (required when set), `fail_first` (HTTP statuses answered to the
first queries, 429 with `Retry-After`), `errors_first` (ArcGIS error codes answered as
HTTP 200 to the first queries), `republish_after_pages` (after that many feature pages
the layer is republished: edit date and one parcel change), `editing_info` (False: no
editingInfo), `last_modified` (an HTTP Last-Modified header on the metadata), `hang`
(queries wait on `release`, set when the server stops; bounded by `HANG_LIMIT_S`). The
request log is `server.log`; `query_requests` and `feature_requests` filter it.
`serving(fake)` / `running(flavour)` serve it until the block ends.

Standard library only (and demo/local_server.py): importable by the demo, the tests and
the benchmarks alike.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from feedledger.demo.local_server import FakeServer, Reply, Request, serve

FLAVOURS = ("10.3", "10.8", "11.1")
SERVICE = "/arcgis/rest/services/Zoning"
LAYER_PATHS = (f"{SERVICE}/FeatureServer/0", f"{SERVICE}/MapServer/0")
ZONES = ("R-1", "R-2", "C-1", "M-1", "AG")
HANG_LIMIT_S = 30.0
FIELDS: list[dict[str, Any]] = [
    {"name": "OBJECTID", "type": "esriFieldTypeOID", "alias": "OBJECTID"},
    {"name": "PARCEL_ID", "type": "esriFieldTypeString", "alias": "Parcel ID", "length": 16},
    {"name": "ZONING", "type": "esriFieldTypeString", "alias": "Zoning", "length": 8},
]
ERROR_MESSAGES = {
    400: "Unable to complete operation.",
    498: "Invalid token.",
    499: "Token Required.",
    500: "Error performing query operation.",
}

Feature = dict[str, Any]  # {"attributes": {...}, "rings": [[[x, y], ...]]}


def parcels(n: int, *, start: int = 1) -> list[Feature]:
    """`n` square-ish parcels (5 vertices, closed, clockwise as Esri states outer rings)."""
    out: list[Feature] = []
    for oid in range(start, start + n):
        x, y = 6_000_000.0 + (oid % 100) * 100.0, 2_000_000.0 + (oid // 100) * 100.0
        ring = [[x, y], [x, y + 90.0], [x + 90.0, y + 90.0], [x + 90.0, y], [x, y]]
        attributes = {"OBJECTID": oid, "PARCEL_ID": f"P{oid:07d}", "ZONING": ZONES[oid % 5]}
        out.append({"attributes": attributes, "rings": [ring]})
    return out


def to_wgs84(x: float, y: float) -> list[float]:
    """The fake's stand-in for reprojecting its layer (wkid 2227, US feet) to WGS84."""
    return [-122.5 + (x - 6_000_000.0) * 3e-6, 37.5 + (y - 2_000_000.0) * 2.5e-6]


def reproject(rings: list[list[list[float]]]) -> list[list[list[float]]]:
    return [[to_wgs84(x, y) for x, y in ring] for ring in rings]


def out_wkid(value: str | None) -> int | None:
    """The wkid an `outSR` parameter asks for (`4326` or `{"wkid": 4326}`), else None."""
    if not value:
        return None
    text = value.strip()
    if text.startswith("{"):
        wkid = json.loads(text).get("wkid")
        return int(wkid) if wkid is not None else None
    return int(text)


def arcgis_error(code: int, message: str | None = None) -> Reply:
    """An ArcGIS error: HTTP 200, the code and message in the body."""
    text = message or ERROR_MESSAGES.get(code, "Error.")
    body = {"error": {"code": code, "message": text, "details": []}}
    return Reply(200, json.dumps(body).encode())


@dataclass
class FakeArcGIS:
    """The layer and how it answers (the knobs: see the module docstring). The defaults
    are the tests' layer: 25 `parcels()` in State Plane feet (wkid 2227), pages of 10."""

    flavour: str = "11.1"
    features: list[Feature] = field(default_factory=lambda: parcels(25))
    fields: list[dict[str, Any]] = field(default_factory=lambda: list(FIELDS))
    edit_date: int = 1_780_000_000_000  # epoch ms
    schema_edit_date: int | None = 1_700_000_000_000  # None: edit_date
    max_record_count: int = 10
    wkid: int = 2227
    extent: tuple[float, float, float, float] | None = (0, 0, 1, 1)
    token: str | None = None
    fail_first: list[int] = field(default_factory=list)
    errors_first: list[int] = field(default_factory=list)
    republish_after_pages: int | None = None
    editing_info: bool = True
    last_modified: str | None = None
    hang: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    # released once by each request that starts hanging (a test waits on it to know a
    # request reached the fake, rather than guessing how long connecting takes)
    hanging: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    pages_served: int = 0
    server: FakeServer | None = None

    @property
    def paginates(self) -> bool:
        return self.flavour != "10.3"

    @property
    def url(self) -> str:
        """The FeatureServer layer's URL (the MapServer one is `map_url`)."""
        assert self.server is not None
        return f"{self.server.base}{LAYER_PATHS[0]}"

    @property
    def map_url(self) -> str:
        assert self.server is not None
        return f"{self.server.base}{LAYER_PATHS[1]}"

    @property
    def query_requests(self) -> list[Request]:
        assert self.server is not None
        return [r for r in self.server.log if r.path.endswith("/query")]

    @property
    def feature_requests(self) -> list[Request]:
        """Queries that answer features (not counts or id lists)."""
        return [
            r
            for r in self.query_requests
            if r.query.get("returnCountOnly") != "true" and r.query.get("returnIdsOnly") != "true"
        ]

    def republish(self) -> None:
        """A new edit of the layer: a later edit date and the first parcel rezoned and moved."""
        self.edit_date += 60_000
        first = self.features[0]
        first["attributes"]["ZONING"] = "MU-" + str(self.edit_date)[-4:]
        first["rings"] = [[[x + 1.0, y] for x, y in ring] for ring in first["rings"]]

    # --- answers -----------------------------------------------------------------

    def route(self, request: Request) -> Reply:
        layer = next((p for p in LAYER_PATHS if request.path.startswith(p)), None)
        if layer is None:
            return Reply(404, b"<html><body>Not Found</body></html>", "text/html")
        if self.token is not None and request.query.get("token") != self.token:
            return arcgis_error(499 if "token" not in request.query else 498)
        if request.path.rstrip("/") == layer:
            return self.metadata(layer)
        if request.path != f"{layer}/query":
            return arcgis_error(400, "Requested operation is not supported by this service.")
        if self.fail_first:
            status = self.fail_first.pop(0)
            return Reply(status, b"Too Many Requests", "text/plain", {"Retry-After": "1"})
        if self.errors_first:
            return arcgis_error(self.errors_first.pop(0))
        if self.hang:
            self.hanging.release()
            self.release.wait(HANG_LIMIT_S)
            return arcgis_error(500)
        return self.query(request)

    def metadata(self, layer: str) -> Reply:
        sr = {"wkid": self.wkid, "latestWkid": self.wkid}
        meta: dict[str, Any] = {
            "currentVersion": {"10.3": 10.3, "10.8": 10.81, "11.1": 11.1}[self.flavour],
            "id": 0,
            "name": "Zoning",
            "type": "Feature Layer",
            "geometryType": "esriGeometryPolygon",
            "objectIdField": "OBJECTID",
            "fields": self.fields,
            "maxRecordCount": self.max_record_count,
            "supportedQueryFormats": "JSON, geoJSON, PBF" if self.paginates else "JSON, AMF",
            "advancedQueryCapabilities": {
                "supportsPagination": self.paginates,
                "supportsOrderBy": True,
            },
            "capabilities": "Map,Query,Data" if "MapServer" in layer else "Query",
            "extent": {**self.bounds(), "spatialReference": sr},
            "sourceSpatialReference": sr,
        }
        if self.editing_info:
            meta["editingInfo"] = (
                {"lastEditDate": self.edit_date}
                if self.flavour == "10.3"
                else {
                    "lastEditDate": self.edit_date,
                    "schemaLastEditDate": self.edit_date
                    if self.schema_edit_date is None
                    else self.schema_edit_date,
                    "dataLastEditDate": self.edit_date,
                }
            )
        headers = {"Last-Modified": self.last_modified} if self.last_modified else {}
        return Reply(200, json.dumps(meta).encode(), headers=headers)

    def bounds(self) -> dict[str, float]:
        """The metadata's extent: `extent`, or (None) the features' bounding box."""
        if self.extent is not None:
            xmin, ymin, xmax, ymax = self.extent
        else:
            points = [p for f in self.features for ring in f["rings"] for p in ring]
            xs, ys = [p[0] for p in points] or [0.0], [p[1] for p in points] or [0.0]
            xmin, ymin, xmax, ymax = min(xs), min(ys), max(xs), max(ys)
        return {"xmin": xmin, "ymin": ymin, "xmax": xmax, "ymax": ymax}

    def query(self, request: Request) -> Reply:
        q = request.query
        if q.get("where", "1=1").replace(" ", "") != "1=1":
            return arcgis_error(400, "Unable to complete operation: unsupported where clause.")
        selected = sorted(self.features, key=lambda f: int(f["attributes"]["OBJECTID"]))
        if "objectIds" in q:
            wanted = {int(i) for i in q["objectIds"].split(",") if i.strip()}
            selected = [f for f in selected if f["attributes"]["OBJECTID"] in wanted]
        if q.get("returnCountOnly") == "true":
            return Reply(200, json.dumps({"count": len(selected)}).encode())
        if q.get("returnIdsOnly") == "true":
            ids = [f["attributes"]["OBJECTID"] for f in selected]
            body = {"objectIdFieldName": "OBJECTID", "objectIds": ids}
            return Reply(200, json.dumps(body).encode())
        fmt = q.get("f", "html")
        if fmt not in ("json", "geojson", "pjson") or (fmt == "geojson" and not self.paginates):
            return arcgis_error(400, f"Invalid or missing input parameters: f={fmt}.")
        offset, count = 0, self.max_record_count
        if self.paginates:
            offset = int(q.get("resultOffset", "0"))
            count = min(int(q.get("resultRecordCount", count)), self.max_record_count)
        page = selected[offset : offset + count]
        exceeded = offset + count < len(selected)
        self.pages_served += 1
        if self.republish_after_pages == self.pages_served:
            self.republish()  # the pages after this one see the new data
        out_fields = q.get("outFields", "*")
        names = None if out_fields == "*" else {n.strip() for n in out_fields.split(",")}
        wkid = out_wkid(q.get("outSR"))
        if wkid not in (None, self.wkid, 4326):
            return arcgis_error(400, f"Invalid or missing input parameters: outSR={wkid}.")
        if wkid == 4326 and self.wkid != 4326:
            page = [{**f, "rings": reproject(f["rings"])} for f in page]
        body = (
            self.geojson(page, names, exceeded)
            if fmt == "geojson"
            else self.esri_json(page, names, exceeded, wkid or self.wkid)
        )
        return Reply(200, json.dumps(body).encode())

    def esri_json(
        self, page: list[Feature], names: set[str] | None, exceeded: bool, wkid: int
    ) -> Any:
        body: dict[str, Any] = {
            "objectIdFieldName": "OBJECTID",
            "globalIdFieldName": "",
            "geometryType": "esriGeometryPolygon",
            "spatialReference": {"wkid": wkid, "latestWkid": wkid},
            "fields": [f for f in self.fields if names is None or f["name"] in names],
            "features": [
                {"attributes": pick(f["attributes"], names), "geometry": {"rings": f["rings"]}}
                for f in page
            ],
        }
        if exceeded:
            body["exceededTransferLimit"] = True
        return body

    def geojson(self, page: list[Feature], names: set[str] | None, exceeded: bool) -> Any:
        features = [
            {
                "type": "Feature",
                "id": f["attributes"]["OBJECTID"],
                "geometry": {"type": "Polygon", "coordinates": [r[::-1] for r in f["rings"]]},
                "properties": pick(f["attributes"], names),
            }
            for f in page
        ]
        body: dict[str, Any] = {"type": "FeatureCollection", "features": features}
        if self.flavour.startswith("11"):
            body["properties"] = {"exceededTransferLimit": exceeded}
        return body


def pick(attributes: dict[str, Any], names: set[str] | None) -> dict[str, Any]:
    return (
        dict(attributes) if names is None else {k: attributes[k] for k in attributes if k in names}
    )


@contextmanager
def serving(fake: FakeArcGIS) -> Iterator[FakeArcGIS]:
    """`fake`, serving on 127.0.0.1 (a free port) until the block ends (then any hang is
    released); its URL is `fake.url`."""
    with serve(fake.route) as server:
        fake.server = server
        try:
            yield fake
        finally:
            fake.release.set()  # a hanging handler returns before the server shuts down


@contextmanager
def running(flavour: str = "11.1") -> Iterator[FakeArcGIS]:
    """The tests' layer at `flavour`, serving on 127.0.0.1 until the block ends."""
    assert flavour in FLAVOURS, flavour
    with serving(FakeArcGIS(flavour=flavour)) as fake:
        yield fake
