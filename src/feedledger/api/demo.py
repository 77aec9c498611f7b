"""Deprecated: the demo moved to `feedledger.demo` (a face over the public API, not part
of it). `feedledger.api.demo.<name>` still answers for one release, with a
DeprecationWarning; the demo is imported by name when asked for, so that the API itself
never imports it."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED = ("MOVED", "PARCEL", "ROTATED", "SOURCE", "ZONING", "Demo", "ZoningDemo", "build_demo")


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"feedledger.api.demo.{name} moved to feedledger.demo.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module("feedledger.demo"), name)
