"""feedledger: an honest, replayable, bitemporal history of external data feeds.

    import feedledger as fl
    led = fl.open("path/to/workspace")
    src = led.source("larimer")

See docs/api.md. Everything not in `__all__` is private by convention.

The names are imported on first use (PEP 562 `__getattr__`), so `import feedledger`, and
every `import feedledger.<module>` (which imports this package first), stays cheap: the
CLI's `--help` does not pay for the whole API and its pydantic models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedledger.api.destination import Destination
    from feedledger.api.errors import GapWarning, InGap, NotObserved
    from feedledger.api.explain import ExplainVerdict, Explanation, HeldRow, Incoming
    from feedledger.api.features import Feature, FeaturePage, Layer, LayerExtent
    from feedledger.api.ledger import Ledger, init, open
    from feedledger.api.notify import Correction, Deliveries, DeliveryStatus, Dispatched, Subscriber
    from feedledger.api.results import (
        AsOf,
        Assessment,
        Change,
        Check,
        Counts,
        DestinationLag,
        FreezeState,
        Gap,
        Ingested,
        Manifest,
        NothingToDo,
        NotModified,
        Payload,
        Publication,
        Reconciliation,
        Recovered,
        ResidentProcess,
        Resumption,
        Retraction,
        Run,
        SourceHealth,
        Step,
        SyncReport,
        Verification,
        Version,
        WarmState,
        Watermark,
        WindowRun,
    )
    from feedledger.api.source import Source
    from feedledger.model.errors import (
        AmbiguousPayloadError,
        ArchiveUnavailableError,
        BadPayloadError,
        ConfigError,
        FeedledgerError,
        FetchError,
        LeaseHeldError,
        MassDeleteError,
        NotFoundError,
        RetractConflictError,
        SourceFrozenError,
        SourceNotFound,
        StaleWatermarkError,
        StoreUnavailableError,
    )
    from feedledger.model.source import SourceConfig
    from feedledger.model.types import (
        ChangeKind,
        HealthStatus,
        IngestStatus,
        Outcome,
        PayloadKind,
        Presence,
        ReviewAction,
        RunKind,
        RunStatus,
        SyncStatus,
    )

__version__ = "0.1.0"

# module -> the public names it defines (the same as the imports above, for type checkers)
_EXPORTS: dict[str, tuple[str, ...]] = {
    "feedledger.api.destination": ("Destination",),
    "feedledger.api.explain": ("ExplainVerdict", "Explanation", "HeldRow", "Incoming"),
    "feedledger.api.errors": ("GapWarning", "InGap", "NotObserved"),
    "feedledger.api.features": ("Feature", "FeaturePage", "Layer", "LayerExtent"),
    "feedledger.api.ledger": ("Ledger", "init", "open"),
    "feedledger.api.notify": (
        "Correction",
        "Deliveries",
        "DeliveryStatus",
        "Dispatched",
        "Subscriber",
    ),
    "feedledger.api.results": (
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
        "Reconciliation",
        "Recovered",
        "ResidentProcess",
        "Resumption",
        "Retraction",
        "Run",
        "SourceHealth",
        "Step",
        "SyncReport",
        "Verification",
        "Version",
        "WarmState",
        "Watermark",
        "WindowRun",
    ),
    "feedledger.api.source": ("Source",),
    "feedledger.model.errors": (
        "AmbiguousPayloadError",
        "ArchiveUnavailableError",
        "BadPayloadError",
        "ConfigError",
        "FeedledgerError",
        "FetchError",
        "LeaseHeldError",
        "MassDeleteError",
        "NotFoundError",
        "RetractConflictError",
        "SourceFrozenError",
        "SourceNotFound",
        "StaleWatermarkError",
        "StoreUnavailableError",
    ),
    "feedledger.model.source": ("SourceConfig",),
    "feedledger.model.types": (
        "ChangeKind",
        "HealthStatus",
        "IngestStatus",
        "Outcome",
        "PayloadKind",
        "Presence",
        "ReviewAction",
        "RunKind",
        "RunStatus",
        "SyncStatus",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and then kept here."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "AmbiguousPayloadError",
    "ArchiveUnavailableError",
    "AsOf",
    "Assessment",
    "BadPayloadError",
    "Change",
    "ChangeKind",
    "Check",
    "ConfigError",
    "Correction",
    "Counts",
    "Deliveries",
    "DeliveryStatus",
    "Destination",
    "DestinationLag",
    "Dispatched",
    "ExplainVerdict",
    "Explanation",
    "Feature",
    "FeaturePage",
    "FeedledgerError",
    "FetchError",
    "FreezeState",
    "Gap",
    "GapWarning",
    "HealthStatus",
    "HeldRow",
    "InGap",
    "Incoming",
    "IngestStatus",
    "Ingested",
    "Layer",
    "LayerExtent",
    "LeaseHeldError",
    "Ledger",
    "Manifest",
    "MassDeleteError",
    "NotFoundError",
    "NotModified",
    "NotObserved",
    "NothingToDo",
    "Outcome",
    "Payload",
    "PayloadKind",
    "Presence",
    "Publication",
    "Reconciliation",
    "Recovered",
    "ResidentProcess",
    "Resumption",
    "RetractConflictError",
    "Retraction",
    "ReviewAction",
    "Run",
    "RunKind",
    "RunStatus",
    "Source",
    "SourceConfig",
    "SourceFrozenError",
    "SourceHealth",
    "SourceNotFound",
    "StaleWatermarkError",
    "Step",
    "StoreUnavailableError",
    "Subscriber",
    "SyncReport",
    "SyncStatus",
    "Verification",
    "Version",
    "WarmState",
    "Watermark",
    "WindowRun",
    "__version__",
    "init",
    "open",
]
