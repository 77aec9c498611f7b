"""Per-source defaults that both the declaration (model/source.py, validated with pydantic)
and the CLI's `source add` options state. Plain constants, so the CLI can build its
options without importing pydantic."""

from __future__ import annotations

# Geometry changes are judged on coordinates snapped to this grid, in the layer's unit
# (formats/spatial/geometry.py explains the default and when to choose a coarser one).
DEFAULT_GEOMETRY_GRID = 1e-9

# Fetch limits (per source, in feedledger.toml): a payload larger than this is refused
# while it is being read (a server streaming without end), and a whole fetch -- connect,
# headers, body -- is given up after this many seconds (a server trickling bytes).
DEFAULT_MAX_PAYLOAD_BYTES = 5 * 1024**3
DEFAULT_FETCH_DEADLINE_S = 1800.0
