"""The demo workspace (`feedledger demo`): a synthetic county feed, ingested payload by
payload, opened through the public API."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from feedledger.api.results import Ingested
from feedledger.pipeline.demo import PARCEL, SOURCE

__all__ = ["PARCEL", "SOURCE", "Demo", "build_demo"]


@dataclass(frozen=True)
class Demo:
    """The demo workspace's folder and its ingested files, each with its live run."""

    workspace: Path
    files: list[Path]
    results: list[Ingested]


def build_demo(directory: str | os.PathLike[str], *, store: str | None = None) -> Demo:
    """(Re)create the demo workspace in `directory` and ingest its payloads; open it with
    `feedledger.open(demo.workspace)`."""
    from feedledger.pipeline.demo import build_demo as build

    result = build(Path(directory), store_url=store)
    return Demo(result.workspace, list(result.files), [Ingested.of(r) for r in result.results])
