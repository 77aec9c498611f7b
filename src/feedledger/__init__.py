"""feedledger: an honest, replayable, bitemporal history of external data feeds.

    import feedledger as fl
    led = fl.open("path/to/workspace")
    src = led.source("larimer")

See docs/api.md. Everything not in `__all__` is private by convention."""

from feedledger.api.destination import Destination, DestinationLag, Manifest
from feedledger.api.ledger import Ledger, init, open
from feedledger.api.notify import Correction, Deliveries, DeliveryStatus, Dispatched, Subscriber
from feedledger.api.reports import (
    Assessment,
    FreezeState,
    NothingToDo,
    NotModified,
    Payload,
    Reconciliation,
    Recovered,
    Retraction,
    SourceHealth,
    Step,
    SyncReport,
    Verification,
    WindowRun,
)
from feedledger.api.results import AsOf, Change, Counts, Gap, Ingested, Run, Version, Watermark
from feedledger.api.source import Source
from feedledger.model.errors import (
    AmbiguousPayloadError,
    ArchiveUnavailableError,
    BadPayloadError,
    ConfigError,
    FeedledgerError,
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
    RunKind,
    RunStatus,
)

__version__ = "0.1.0"

__all__ = [
    "AmbiguousPayloadError",
    "ArchiveUnavailableError",
    "AsOf",
    "Assessment",
    "BadPayloadError",
    "Change",
    "ChangeKind",
    "ConfigError",
    "Correction",
    "Counts",
    "Deliveries",
    "DeliveryStatus",
    "Destination",
    "DestinationLag",
    "Dispatched",
    "FeedledgerError",
    "FreezeState",
    "Gap",
    "HealthStatus",
    "IngestStatus",
    "Ingested",
    "LeaseHeldError",
    "Ledger",
    "Manifest",
    "MassDeleteError",
    "NotFoundError",
    "NotModified",
    "NothingToDo",
    "Outcome",
    "Payload",
    "PayloadKind",
    "Presence",
    "Reconciliation",
    "Recovered",
    "RetractConflictError",
    "Retraction",
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
    "Verification",
    "Version",
    "Watermark",
    "WindowRun",
    "__version__",
    "init",
    "open",
]
