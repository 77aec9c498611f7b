"""The canonical grid: every coordinate snapped to the nearest multiple of the grid, in
numpy exactly as GEOS's pointwise `set_precision` rounds it (formats/spatial/geometry.py's
canonical form is computed on the snapped coordinates)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from feedledger.model.errors import ConfigError


def snap_to_grid(coords: npt.NDArray[np.float64], grid: float) -> npt.NDArray[np.float64]:
    """Every coordinate rounded to the nearest multiple of `grid`, exactly as GEOS's
    pointwise `set_precision` rounds it (its PrecisionModel: `round(x * scale) / scale`
    with `scale = 1 / grid` snapped to an integer within 1e-5, or `round(x / grid) *
    grid` for a grid above 1; `round` is Java's `Math.round`, halves up), in numpy: the
    same numbers, several times faster than rebuilding every geometry through GEOS."""
    if grid > 1:
        return _round_half_up(coords / grid) * grid
    scale = 1.0 / grid
    nearest = round(scale)
    if abs(scale - nearest) < 1e-5:
        scale = float(nearest)
    with np.errstate(over="ignore"):
        scaled = coords * scale
    # a coordinate within a factor `scale` of the largest float (above ~1.8e299 on the
    # default grid) overflows when scaled: it is far beyond 2**52 grid steps, so no
    # grid point lies between it and its float neighbours, and it is kept as it is
    overflow = np.isinf(scaled) & np.isfinite(coords)
    out = _round_half_up(scaled)
    out /= scale
    if overflow.any():
        out[overflow] = coords[overflow]
    return out


def _round_half_up(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The integer `j` with `v` in [j - 0.5, j + 0.5) for each `v` (Java's Math.round,
    as GEOS rounds). `floor(v + 0.5)` is that integer unless `v + 0.5` was rounded;
    `j +- 0.5` are exact below 2**52, so the rare miss is seen and corrected; from 2**52
    on every float is an integer and is its own rounding."""
    rounded = values + 0.5
    np.floor(rounded, out=rounded)
    bound = rounded - 0.5
    over = values < bound
    if over.any():
        rounded[over] -= 1.0
        bound = rounded - 0.5
    np.add(bound, 1.0, out=bound)
    under = values >= bound
    if under.any():
        rounded[under] += 1.0
    big = np.abs(values) >= 2.0**52
    if big.any():
        rounded[big] = values[big]
    return rounded


def check_grid(grid: float) -> None:
    if not (isinstance(grid, int | float) and math.isfinite(grid) and grid >= 0):
        raise ConfigError(
            f"geometry grid must be a finite number >= 0 (0 = no snapping), got {grid!r}"
        )
