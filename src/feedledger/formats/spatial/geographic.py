"""Coordinates a geographic layer cannot hold: a layer read in a geographic CRS
(longitude/latitude degrees: WGS84 -- what GDAL takes a GeoJSON without a `crs` member
for, and what the ArcGIS connector archives -- NAD83, ETRS89...) whose coordinates pass
+-180 in x or +-90 in y states projected metres or feet under a degrees label. Applied,
they would be stored, exported and compared as degrees: refused in one line naming the
rows, the bytes kept like any bad payload's.

Which CRS is geographic is known without PROJ (not a dependency): the EPSG codes of
the common geographic CRSs below, OGC's CRS84, and a CRS stated as WKT (`GEOGCS[`,
`GEOGCRS[`) or PROJJSON (`"type": "GeographicCRS"`). Another CRS is not checked.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import shapely

from feedledger.formats.observations import fail, row_list
from feedledger.model.source import SourceConfig

__all__ = ["check_geographic_range", "is_geographic"]

# WGS84 (2-D, 3-D), NAD27, NAD83 and its realisations, ETRS89, GDA94, GDA2020, SIRGAS
# 2000, CGCS2000, JGD2011, ITRF-based WGS84 ensembles as GDAL reports them
_GEOGRAPHIC_EPSG = frozenset(
    {4326, 4979, 4267, 4269, 4152, 4759, 6318, 4258, 4283, 7844, 4674, 4490, 6668, 4617}
)
_EPSG = re.compile(r"^\s*EPSG:(\d+)\s*$", re.IGNORECASE)
_WKT = re.compile(r"^\s*(?:GEOGCS|GEOGCRS|GEODCRS)\[", re.IGNORECASE)


def is_geographic(crs: str | None) -> bool:
    """Whether `crs` (as a reader reports it: `EPSG:4326`, `OGC:CRS84`, WKT or PROJJSON
    text) is a longitude/latitude CRS this module knows."""
    if crs is None:
        return False
    match = _EPSG.match(crs)
    if match:
        return int(match.group(1)) in _GEOGRAPHIC_EPSG
    if crs.strip().upper() in ("OGC:CRS84", "CRS84", "URN:OGC:DEF:CRS:OGC:1.3:CRS84"):
        return True
    if crs.lstrip().startswith("{"):  # PROJJSON: the top-level type (a projected
        try:  # CRS holds a GeographicCRS as its base_crs)
            stated = json.loads(crs)
        except ValueError:
            return False
        return isinstance(stated, dict) and stated.get("type") == "GeographicCRS"
    return _WKT.match(crs) is not None


def check_geographic_range(
    wkb: pa.Array | pa.ChunkedArray, crs: str | None, src: SourceConfig, label: str
) -> None:
    """BadPayloadError when the layer is geographic (`is_geographic(crs)`) and a
    geometry's bounds leave longitude -180..180 or latitude -90..90. Empty geometries
    and NaN coordinates are not judged here."""
    if not is_geographic(crs) or len(wkb) == 0:
        return
    values = wkb.to_numpy(zero_copy_only=False)
    # bytes that are not WKB are the hash's to name (geometry.hash_wkb): not judged here
    with np.errstate(invalid="ignore"):  # a NaN ordinate: refused by the hash
        shapes = shapely.from_wkb(values, on_invalid="ignore")
        bounds = shapely.bounds(shapes)  # (n, 4): xmin ymin xmax ymax; NaN for none
        outside = (
            (bounds[:, 0] < -180.0)
            | (bounds[:, 2] > 180.0)
            | (bounds[:, 1] < -90.0)
            | (bounds[:, 3] > 90.0)
        )
    rows = np.flatnonzero(outside)
    if not rows.size:
        return
    first = bounds[rows[0]]
    raise fail(
        src,
        label,
        f"{row_list(rows.tolist())}: coordinates outside longitude -180..180 / latitude "
        f"-90..90 (the first spans x {first[0]:.6g}..{first[2]:.6g}, y {first[1]:.6g}.."
        f"{first[3]:.6g}) in a layer read as geographic ({crs}): projected coordinates "
        "(metres or feet) labelled as degrees? Nothing was applied",
    )
