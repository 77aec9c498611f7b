"""Frozen value types shared by all layers. No I/O here."""

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
