"""Enumerations of the vocabulary in docs/architecture.md."""

from __future__ import annotations

from enum import StrEnum


class PayloadKind(StrEnum):
    """`snapshot`: complete, absence means deleted. `changes`: partial, explicit deletes only."""

    SNAPSHOT = "snapshot"
    CHANGES = "changes"


class ChangeKind(StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    DELETED = "deleted"


class Outcome(StrEnum):
    """Per-key verdict of a guarded ingest (and, later, of a destination sync)."""

    ACCEPTED = "accepted"
    ALREADY_CURRENT = "already_current"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"
    UNRESOLVED = "unresolved"


class RunKind(StrEnum):
    LIVE = "live"
    BACKFILL = "backfill"
    REPLAY = "replay"
    RETRACTION = "retraction"
    SYNC = "sync"
    MANUAL = "manual"  # a fact recorded by hand (`feedledger gap add`)


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"
    HELD = "held"  # committed, notifications held for review (`feedledger review`)
    RETRACTED = "retracted"  # a held run retracted from review


class AsOfStatus(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    NOT_OBSERVED = "not_observed"
    NOT_KNOWN = "not_known"  # nothing of the source was recorded yet at the known-at time


# The public API's name for an as-of answer (`feedledger.Presence`): present, absent,
# not_observed (inside a gap) or not_known (nothing of the source recorded yet).
Presence = AsOfStatus


class IngestStatus(StrEnum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already_applied"  # the payload was applied before: nothing changed


class HealthStatus(StrEnum):
    OK = "ok"
    STALE = "stale"
    FROZEN = "frozen"
    # the publisher's date is ahead of the clock or went back with other content
    PUBLISHER_DATE = "publisher_date"


class SyncStatus(StrEnum):
    """How a destination sync call ended (`SyncReport.status`)."""

    RUNNING = "running"  # under way (never returned by a finished call)
    FINISHED = "finished"  # a manifest rebuild wrote its whole population
    UP_TO_DATE = "up_to_date"  # the live route drained what was waiting
    STOPPED = "stopped"  # the live route was asked to stop


class ReviewAction(StrEnum):
    """What `review` did to a held run (`ReviewDecision.action`)."""

    RELEASED = "released"  # its notifications go out
    RETRACTED = "retracted"  # retracted; its notifications never go out
