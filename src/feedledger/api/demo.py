"""The demo workspace (`feedledger demo`): a synthetic county feed, ingested payload by
payload, and a zoning layer fetched from the demo's own FeatureServer, opened through
the public API."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from feedledger.api.results import Ingested, NothingToDo, NotModified
from feedledger.pipeline.demo import PARCEL, SOURCE
from feedledger.pipeline.demo_zoning import MOVED, ROTATED, ZONING

__all__ = ["MOVED", "PARCEL", "ROTATED", "SOURCE", "ZONING", "Demo", "ZoningDemo", "build_demo"]


@dataclass(frozen=True)
class ZoningDemo:
    """The zoning part: the layer's URL (served only while the demo ran), the layer's
    publisher date (editingInfo.dataLastEditDate) for each run, each run's result (the
    last run: the layer unchanged, nothing new) and how many feature queries each sent."""

    url: str
    published: list[datetime]
    results: list[Ingested | NothingToDo | NotModified]
    feature_queries: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Demo:
    """The demo workspace's folder and its ingested files, each with its live run, and
    the zoning layer's runs (None when built without it)."""

    workspace: Path
    files: list[Path]
    results: list[Ingested]
    zoning: ZoningDemo | None = None


def build_demo(
    directory: str | os.PathLike[str], *, store: str | None = None, zoning: bool = True
) -> Demo:
    """(Re)create the demo workspace in `directory` and ingest its payloads; open it with
    `feedledger.open(demo.workspace)`. `zoning`: also serve the zoning layer on 127.0.0.1
    for the time of the demo and run the `zoning` source (--connector arcgis) over it."""
    from feedledger.pipeline.demo import build_demo as build

    result = build(Path(directory), store_url=store, zoning=zoning)
    z = result.zoning
    return Demo(
        result.workspace,
        list(result.files),
        [Ingested.of(r) for r in result.results],
        None
        if z is None
        else ZoningDemo(z.url, list(z.published), [_run(r) for r in z.results], z.feature_queries),
    )


def _run(result: Any) -> Ingested | NothingToDo | NotModified:
    from feedledger.pipeline.run import NothingNew

    if result is None:
        return NotModified(ZONING)
    if isinstance(result, NothingNew):
        return NothingToDo(result.source, result.reason, None, result)
    return Ingested.of(result)
