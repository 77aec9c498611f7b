"""Typed results of the public API: frozen dataclasses over the enums of `model/types.py`
(versions, runs, changes, gaps; runs over a window, retraction, health, freezes, archived
payloads, verify, destinations and their manifests).

Instants are aware UTC `datetime`s, dates are `date`s, attributes are decoded JSON.
Each result keeps the record the layer below returned and its `to_json()` is that
record's JSON: exactly what the CLI's `--json` prints for the same command (README,
"JSON output"), so the CLI can render these results without its JSON changing.

The types live in four modules by what they answer about (`common`, `history`, `runs`,
`checks`); every name is also here, the one place callers import them from.
"""

from __future__ import annotations

from feedledger.api.results.checks import (
    Assessment,
    Check,
    DestinationLag,
    Manifest,
    Reconciliation,
    ResidentProcess,
    SourceHealth,
    SyncReport,
    Verification,
    WarmState,
)
from feedledger.api.results.common import (
    Raw,
    decoded,
    instant_of,
    iso_of,
    plain,
)
from feedledger.api.results.history import (
    AsOf,
    Change,
    Gap,
    SnapshotGap,
    Version,
    Watermark,
    opt_version,
)
from feedledger.api.results.runs import (
    Counts,
    FreezeState,
    Ingested,
    NothingToDo,
    NotModified,
    Payload,
    Publication,
    Recovered,
    Resumption,
    Retraction,
    Run,
    Step,
    WindowRun,
)

__all__ = [
    "AsOf",
    "Assessment",
    "Change",
    "Check",
    "Counts",
    "DestinationLag",
    "FreezeState",
    "Gap",
    "Ingested",
    "Manifest",
    "NotModified",
    "NothingToDo",
    "Payload",
    "Publication",
    "Raw",
    "Reconciliation",
    "Recovered",
    "ResidentProcess",
    "Resumption",
    "Retraction",
    "Run",
    "SnapshotGap",
    "SourceHealth",
    "Step",
    "SyncReport",
    "Verification",
    "Version",
    "WarmState",
    "Watermark",
    "WindowRun",
    "decoded",
    "instant_of",
    "iso_of",
    "opt_version",
    "plain",
]
