"""Fault injection at named boundaries, for crash tests (never enabled in normal use).

`FEEDLEDGER_FAULT=<point>[:<n>][:kill]` makes the process raise `InjectedFailure` (or
die at once with SIGKILL when `:kill` is given) when it reaches `<point>` (for a
counted point, the n-th time). Points: `after_archive`, `after_register`,
`mid_transaction`, `before_commit`, `after_commit`, `replay_before_cancel` (a replay's
retraction done, its cancellations not, uncommitted), `after_retraction` (a replay's
retraction committed), `after_payload:<n>` (the n-th payload of a backfill or replay
committed), `after_send` (notifications sent, their deliveries not yet marked),
`before_destination_write:<n>`, `after_destination_write:<n>` (acknowledged, not yet
checkpointed), `after_checkpoint:<n>` (the n-th batch of a destination rebuild),
`destination_staged:<n>` (the n-th batch a destination writes is written (PostgreSQL:
in its staging table, not yet upserted), its transaction open, not committed),
`before_destination_finish` (a rebuild's batches all acknowledged, its destination not
yet finished: a GeoPackage's new file not swapped in), `gpkg_swap_marked` (a GeoPackage
rebuild's new file complete, the old one marked replaced, not yet replaced),
`mid_copy` (PostgreSQL: a payload's first rows sent by COPY, the COPY still open),
`compact_written:<n>` / `compact_deleted:<n>` / `after_compact:<n>` (`archive compact`'s
n-th payload: compressed object created, raw one deleted, payload done),
`archive_encoded` / `archive_object_written` (a payload's object encoded, not yet
written / written, its base cache and sidecar not yet), `before_settle` /
`settle_checking` / `settle_written` (an ingest's object stored raw and its payload
archived, not yet compressed / its compressed frame being checked, decoded in part into
the next base cache's temporary file / compressed, the raw one not yet deleted:
`archive/settle.py`), `delta_before_commit` / `delta_after_commit` (`export delta`: its
rows built, the Delta commit not yet made / made, the store's positions not yet saved).
`:pause` instead of `:kill` makes the process wait there for `FEEDLEDGER_FAULT_PAUSE_S`
seconds (default 5) and go on: time for a test to break something underneath it; with
`FEEDLEDGER_FAULT_RESUME=<path>` it goes on as soon as that file exists (a test that
must do something while the process is held there, however slow the machine).
`FEEDLEDGER_FAULT_PAUSED=<path>`: on entering the pause the process writes that file
(atomically, JSON: `point`, `count`, `pid` and, where the point holds a PostgreSQL
connection, that connection's `backend_pid`), so a test acts on exactly the process
and connection held there -- never on one it guessed from `pg_stat_activity` (another
batch's connection may look the same for a moment).
"""

from __future__ import annotations

import json
import os
import signal
import time

ENV = "FEEDLEDGER_FAULT"
# the file a pause writes when it begins (see the module)
PAUSED_ENV = "FEEDLEDGER_FAULT_PAUSED"
RESUME_ENV = "FEEDLEDGER_FAULT_RESUME"


class InjectedFailure(RuntimeError):
    """Raised at an injected fault point."""


def point(name: str, count: int | None = None, *, backend_pid: int | None = None) -> None:
    """The fault point `name` (its `count`-th pass, where counted); `backend_pid`: the
    PostgreSQL backend of the connection this point holds (published by a pause)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    parts = spec.split(":")
    kill = parts[-1] == "kill"
    pause = parts[-1] == "pause"
    if kill or pause:
        parts = parts[:-1]
    if parts[0] != name:
        return
    if count is not None and len(parts) > 1 and parts[1] != str(count):
        return
    if pause:
        _announce(name, count, backend_pid)
        _pause(float(os.environ.get("FEEDLEDGER_FAULT_PAUSE_S", "5")))
        return
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFailure(f"injected failure at {name}" + (f" #{count}" if count else ""))


def _announce(name: str, count: int | None, backend_pid: int | None) -> None:
    """Write FEEDLEDGER_FAULT_PAUSED's file, if asked for: written whole, then renamed, so
    a reader never sees a part of it."""
    path = os.environ.get(PAUSED_ENV)
    if not path:
        return
    info = {"point": name, "count": count, "pid": os.getpid(), "backend_pid": backend_pid}
    part = f"{path}.{os.getpid()}.part"
    with open(part, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.replace(part, path)


def _pause(seconds: float) -> None:
    resume = os.environ.get(RESUME_ENV)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if resume and os.path.exists(resume):
            return
        time.sleep(min(0.05 if resume else seconds, max(0.0, deadline - time.monotonic())))
