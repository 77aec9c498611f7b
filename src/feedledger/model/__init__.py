"""Frozen value types shared by all layers: the enums, the error hierarchy, time and
cadence arithmetic, source and destination declarations, payload references, hashing
and the stable JSON output. No I/O here.

May import: nothing else of feedledger's (the bottom layer, beside the independent
leaves `timing`, `faults` and `ahead`), nor SQL (pyproject's [tool.importlinter]).
Every layer may import it; the CLI's `--help` loads only its light modules
(`model.source`, pydantic's, is loaded by the commands that need it)."""

from feedledger.model.errors import (
    AmbiguousPayloadError,
    BadPayloadError,
    ConfigError,
    FeedledgerError,
    LeaseHeldError,
    MassDeleteError,
    NotFoundError,
    StaleWatermarkError,
    StoreUnavailableError,
)
from feedledger.model.types import (
    AsOfStatus,
    ChangeKind,
    Outcome,
    PayloadKind,
    RunKind,
    RunStatus,
)

__all__ = [
    "AmbiguousPayloadError",
    "AsOfStatus",
    "BadPayloadError",
    "ChangeKind",
    "ConfigError",
    "FeedledgerError",
    "LeaseHeldError",
    "MassDeleteError",
    "NotFoundError",
    "Outcome",
    "PayloadKind",
    "RunKind",
    "RunStatus",
    "StaleWatermarkError",
    "StoreUnavailableError",
]
