"""Deliverable news the ledger no longer holds after a replay or a retraction: shared by
the replay-notify and retry-cancelling tests.
"""

from __future__ import annotations

import json

from sqlalchemy import select

from feedledger.ledger.schema import applications, outbox
from feedledger.notify.tables import deliveries
from helpers import Cli
from pipeline.backfill_scenario import fetch

UNDELIVERED = ("pending", "failed", "dead")


def deliverable(cli: Cli) -> list[tuple[str, str, str]]:
    """(topic, run, payload) of every message that may still go out: outbox rows not
    fanned out yet, and undelivered messages (each change of a digest)."""
    rows, msgs = fetch(
        cli.ws,
        select(outbox).where(outbox.c.status.in_(("pending", "held"))),
        select(deliveries, outbox.c.run_id, outbox.c.payload_id)
        .join(outbox, outbox.c.outbox_id == deliveries.c.outbox_id)
        .where(deliveries.c.status.in_(UNDELIVERED)),
    )
    out = [(r.topic, r.run_id, r.payload_id) for r in rows]
    for m in msgs:
        if m.topic == "digest":
            out += [
                ("changes", c["run_id"], c["payload_id"]) for c in json.loads(m.body)["changes"]
            ]
        else:
            out.append((m.topic if m.topic != "change" else "changes", m.run_id, m.payload_id))
    return out


def stale(cli: Cli) -> list[tuple[str, str, str]]:
    """Deliverable news the ledger no longer holds: a change set of an application
    retracted, or a summary of a run with any application retracted."""
    (apps,) = fetch(cli.ws, select(applications))
    gone = {(a.run_id, a.payload_id) for a in apps if a.retracted_at is not None}
    hit = {run for run, _payload in gone}
    return [
        m
        for m in deliverable(cli)
        if (m[0] == "changes" and (m[1], m[2]) in gone) or (m[0] == "summary" and m[1] in hit)
    ]
