"""Non-finite coordinates refused, in the user's words (`FeatureGeometryError` naming the
feature): a NaN or infinite ordinate is no position -- kept, it would be written out as
an empty or unreadable geometry and hide later moves. Checked on the coordinate arrays
every geometry's canonical form is computed from (`check_finite`, formats/spatial/geometry.py),
and in GeoJSON text before GDAL reads it (`check_geojson_finite`), since GDAL reads a
point with one NaN ordinate as an empty point."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import numpy.typing as npt

from feedledger.model.errors import BadPayloadError


class FeatureGeometryError(BadPayloadError):
    """The geometry of row `row` (0-based, of the array given) cannot be kept: `what`
    says why in the user's words."""

    def __init__(self, row: int, what: str) -> None:
        self.row = row
        self.what = what
        super().__init__(f"feature {row + 1}: {what}")


def check_finite(coords: npt.NDArray[np.float64], index: npt.NDArray[np.intp]) -> None:
    """Every coordinate is a finite number. A NaN or infinite ordinate is no position:
    kept, it would be written out as an empty or unreadable geometry and hide later
    moves, so the geometry is refused (an empty geometry has no coordinates at all)."""
    bad = ~np.isfinite(coords)
    if not bad.any():
        return
    row, col = (int(v) for v in np.argwhere(bad)[0])
    raise not_a_position(int(index[row]), float(coords[row, col]))


def not_a_position(row: int, value: float) -> FeatureGeometryError:
    """The refusal of a non-finite coordinate `value` in feature `row` (0-based)."""
    what = "NaN" if math.isnan(value) else "an infinite number"
    return FeatureGeometryError(
        row, f"a coordinate is {what}, not a position (coordinates must be finite numbers)"
    )


# a bare NaN or Infinity as an array element, as a coordinate is written (a property's
# NaN, `"area": NaN`, follows a colon and is a property value, read as the text "nan")
_NON_FINITE_TOKEN = re.compile(rb"[\[,]\s*[-+]?(?:NaN|Infinity)\s*[,\]]")
_SIGNED_NAN = re.compile(rb"[-+]NaN\b")  # -NaN: Python's json reads only NaN


def check_geojson_finite(data: bytes, *, unreadable: bool = False) -> None:
    """A GeoJSON text (FeatureCollection, Feature or geometry) whose coordinates hold a
    NaN or Infinity (not JSON, but written by Python's json and read by GDAL) is refused
    like any other non-finite coordinate (`FeatureGeometryError`): GDAL reads a point
    with one NaN ordinate as an empty point, so after reading it could no longer be told
    from a stated empty one. Only bytes that hold such a token as an array element are
    parsed here (in Python: the rare payload that has one), or, `unreadable`, a text
    GDAL could not read (a `1e309` coordinate, too large for a float, is infinite)."""
    if not unreadable and _NON_FINITE_TOKEN.search(data) is None:
        return
    try:
        doc = json.loads(_SIGNED_NAN.sub(b"NaN", data))
    except ValueError:  # not one JSON text: GDAL says what is wrong with it
        return
    if isinstance(doc, dict) and isinstance(doc.get("features"), list):
        geometries = [f.get("geometry") if isinstance(f, dict) else None for f in doc["features"]]
    elif isinstance(doc, dict) and doc.get("type") == "Feature":
        geometries = [doc.get("geometry")]
    else:
        geometries = [doc]
    for row, geometry in enumerate(geometries):
        value = _non_finite_in(geometry.get("coordinates") if isinstance(geometry, dict) else None)
        if value is not None:
            raise not_a_position(row, value)


def _non_finite_in(coordinates: object) -> float | None:
    stack = [coordinates]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return item
    return None
