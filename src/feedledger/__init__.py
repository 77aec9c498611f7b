"""feedledger: an honest, replayable, bitemporal history of external data feeds.

    import feedledger as fl
    led = fl.open("path/to/workspace")
    src = led.source("larimer")

See docs/api.md. Everything not in `__all__` is private by convention."""

from feedledger.api.destination import Destination, DestinationLag, Manifest
from feedledger.api.explain import ExplainVerdict, Explanation, HeldRow, Incoming
from feedledger.api.ledger import Ledger, init, open
from feedledger.api.notify import Correction, Deliveries, DeliveryStatus, Dispatched, Subscriber
from feedledger.api.reports import (
    Assessment,
    Check,
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
from feedledger.api.results import (
    AsOf,
    Change,
    Counts,
    Gap,
    Ingested,
    Resumption,
    Run,
    Version,
    Watermark,
)
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
    ReviewAction,
    RunKind,
    RunStatus,
    SyncStatus,
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
    "FeedledgerError",
    "FreezeState",
    "Gap",
    "HealthStatus",
    "HeldRow",
    "Incoming",
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
    "Watermark",
    "WindowRun",
    "__version__",
    "init",
    "open",
]
