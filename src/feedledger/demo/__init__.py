"""The demo: `feedledger demo`'s workspace and what it shows, and the project's one fake
ArcGIS FeatureServer. A face, like the CLI and the HTTP server, not part of the core:
nothing under it (api, pipeline, ledger, ...) imports it; the CLI's `demo` command calls
it (cli/commands/demo_cmd.py), the tests and benchmarks use its FeatureServer.

- `workspace`: `build_demo` -- a synthetic county parcel feed ingested payload by
  payload, then the zoning layer's runs; `Demo`.
- `zoning`: the zoning layer (six WGS84 polygons over three publication days), served on
  127.0.0.1 for the demo and run as an `--connector arcgis` source; `ZoningDemo`.
- `report`: what `feedledger demo` shows (tables and texts, rendered by the CLI).
- `featureserver`: a fake ArcGIS REST server (FeatureServer/MapServer layer, three
  server versions, paging, errors, tokens, hostile answers...), the demo's and the tests'.
- `local_server`: a threaded HTTP server on 127.0.0.1 answering from a callable, with a
  request log (under the FeatureServer and the tests' other fakes).

May import: the public API (`import feedledger`), the standard library, and one module
under it, `feedledger.pipeline.intake.run` (the zoning runs take the caller's clock, which
`Source.run` does not: see demo/zoning.py); pyproject's import-linter contracts say so.
`featureserver` and `local_server` import only the standard library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedledger.demo.workspace import PARCEL, SOURCE, Demo, build_demo
    from feedledger.demo.zoning import MOVED, ROTATED, ZONING, ZoningDemo

# imported on first use (PEP 562), so that the FeatureServer's importers (the tests'
# fakes, the benchmarks' server process) load no more than it
_EXPORTS = {
    "feedledger.demo.workspace": ("PARCEL", "SOURCE", "Demo", "build_demo"),
    "feedledger.demo.zoning": ("MOVED", "ROTATED", "ZONING", "ZoningDemo"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["MOVED", "PARCEL", "ROTATED", "SOURCE", "ZONING", "Demo", "ZoningDemo", "build_demo"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
