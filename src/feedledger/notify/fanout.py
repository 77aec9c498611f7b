"""Fan-out: each pending outbox row becomes messages, in one transaction that also marks
the row `dispatched` -- one message per change for a `changes` row, one for a run-level
notice (`summary`, `retraction`, `correction`) -- times the subscribers that want its
source (digest subscribers get their changes folded into one message per UTC window).
A message's id (`webhook-id`) is derived from (source, payload, run, key, change) --
one application of a payload -- or from the notice's idempotency key, so every attempt
of it, and any redelivery after a crash between sending and marking, carries the same
id. Rows written `suppressed` (a backfill's per-payload changes) or `held` (a run under
review) are never fanned out, nor are rows `cancelled` by a retraction (Invariant 11).
A retraction notice goes only to the subscribers that were delivered any message of what
it took back -- the retracted runs' notices, the change sets of the applications it
retracted (a replay may take back only a run's later payloads) -- none if nobody was;
while a cancelled message of those runs may still be on the wire (a live dispatcher's
claim), it waits, and the rows after it with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, select, text, update

from feedledger.ledger.encoding import Decoder
from feedledger.ledger.records import geometry_changed
from feedledger.ledger.schema import CHANGE_NAMES, outbox
from feedledger.ledger.store import Store
from feedledger.model.jsonout import RawJSON, dumps
from feedledger.model.timeutil import iso
from feedledger.notify.cancellations import heard_of, unsettled
from feedledger.notify.subscriptions import Subscriber
from feedledger.notify.tables import deliveries

EXPAND_BATCH = 50  # outbox rows per fan-out transaction


def message_id(*parts: str) -> str:
    return "msg_" + hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:32]


def _raw(text_value: str | None) -> RawJSON | None:
    return RawJSON(text_value) if text_value is not None else None


def _change_messages(conn: Connection, row: Any) -> list[tuple[str, str, str]]:
    sql = text(
        "SELECT v.key, v.change, v.valid_from, v.recorded_at, v.backfill, "
        "p.attributes AS before_attributes, p.fields_id AS before_fields_id, "
        "v.attributes AS after_attributes, v.fields_id AS after_fields_id, "
        "v.geometry_hash AS after_gh, p.geometry_hash AS before_gh "
        "FROM applications a JOIN versions v ON v.version_id >= a.first_version_id "
        "AND v.version_id < a.first_version_id + a.changes "
        "LEFT JOIN versions p ON p.version_id = v.prev_version_id "
        "WHERE a.run_id = :run AND a.payload_id = :payload AND a.changes > 0 "
        "ORDER BY v.version_id"
    )
    # a GIS source's outbox row says so (ledger/payload_txn.py): its change messages say
    # whether the geometry changed; other sources' messages keep their shape
    geo = bool(json.loads(row.body).get("geo")) if row.body else False
    out = []
    decode = Decoder(conn)
    for v in conn.execute(sql, {"run": row.run_id, "payload": row.payload_id}):
        change = CHANGE_NAMES[v.change]
        body = {
            "type": "change",
            "source": row.source,
            "payload_id": row.payload_id,
            "run_id": row.run_id,
            "key": RawJSON(v.key),
            "change": change,
            "valid_from": iso(v.valid_from),
            "recorded_at": iso(v.recorded_at),
            "backfill": bool(v.backfill),
            "before": _raw(decode.row(v, "before_")),
            "after": _raw(decode.row(v, "after_")),
        }
        if geo:
            body["geometry_changed"] = geometry_changed(v.before_gh, v.after_gh)
        # the application (payload in its run): a payload re-applied after a retraction
        # announces a new change; every attempt of one announcement keeps its id
        mid = message_id(row.source, row.payload_id, row.run_id, v.key, change)
        out.append((mid, "change", dumps(body, indent=None)))
    return out


def _notice_message(row: Any) -> tuple[str, str, str]:
    body = {"type": row.topic, "source": row.source, "run_id": row.run_id}
    body.update(json.loads(row.body))
    return (message_id(row.idempotency_key), row.topic, dumps(body, indent=None))


def expand(store: Store, subs: Sequence[Subscriber], now_us: int) -> int:
    """Fan pending outbox rows out into deliveries; returns the messages created."""
    created = 0
    while True:
        with store.begin() as conn:
            rows = list(
                conn.execute(
                    store.for_update(
                        select(outbox)
                        .where(outbox.c.status == "pending")
                        .order_by(outbox.c.outbox_id)
                        .limit(EXPAND_BATCH)
                    )
                )
            )
            if not rows:
                return created
            for row in rows:
                wanted = [s for s in subs if s.wants(row.source)]
                if wanted and row.topic == "retraction":
                    runs = json.loads(row.body).get("retracted_runs") or []
                    if unsettled(conn, runs, now_us):
                        return created  # this row and later ones wait, in order
                    heard = heard_of(conn, runs, [s.name for s in wanted], retracted_by=row.run_id)
                    wanted = [s for s in wanted if s.name in heard]
                if wanted:
                    messages = (
                        _change_messages(conn, row)
                        if row.topic == "changes"
                        else [_notice_message(row)]
                    )
                    each = [s for s in wanted if s.digest == "none" or row.topic != "changes"]
                    values = [
                        {
                            "subscriber": s.name,
                            "outbox_id": row.outbox_id,
                            "message_id": mid,
                            "source": row.source,
                            "topic": topic,
                            "body": body,
                            "status": "pending",
                            "attempts": 0,
                            "next_attempt_at": 0,  # due at once, whatever the clock says
                            "created_at": now_us,
                        }
                        for s in each
                        for mid, topic, body in messages
                    ]
                    if values:
                        conn.execute(insert(deliveries), values)
                        created += len(values)
                    for s in wanted:
                        if s.digest != "none" and row.topic == "changes" and messages:
                            created += _fold_into_digest(conn, s, row, messages, now_us)
                conn.execute(
                    update(outbox)
                    .where(outbox.c.outbox_id == row.outbox_id)
                    .values(status="dispatched")
                )


DIGEST_SECONDS = {"hourly": 3600, "daily": 86400}


def _fold_into_digest(
    conn: Connection, sub: Subscriber, row: Any, messages: list[tuple[str, str, str]], now_us: int
) -> int:
    """Add change messages to the subscriber's digest for the current window (UTC hour
    or day of the fan-out), created if needed; it is due when the window closes.
    Returns 1 if a new digest message was created."""
    span = DIGEST_SECONDS[sub.digest] * 1_000_000
    start = now_us - now_us % span
    mid = message_id("digest", sub.name, str(start))
    items = [json.loads(body) for _mid, _topic, body in messages]
    existing = conn.execute(
        select(deliveries.c.delivery_id, deliveries.c.body).where(
            deliveries.c.subscriber == sub.name,
            deliveries.c.message_id == mid,
            deliveries.c.status == "pending",
            deliveries.c.attempts == 0,
        )
    ).first()
    if existing is not None:
        body = json.loads(existing.body)
        body["changes"].extend(items)
        body["count"] = len(body["changes"])
        conn.execute(
            update(deliveries)
            .where(deliveries.c.delivery_id == existing.delivery_id)
            .values(body=json.dumps(body, ensure_ascii=False))
        )
        return 0
    if conn.execute(
        select(deliveries.c.delivery_id).where(
            deliveries.c.subscriber == sub.name, deliveries.c.message_id == mid
        )
    ).first():
        # this window's digest already went out: the late changes get a digest of their own
        mid = message_id("digest", sub.name, str(start), str(row.outbox_id))
    body = {
        "type": "digest",
        "digest": sub.digest,
        "window_start": iso(start),
        "window_end": iso(start + span),
        "count": len(items),
        "changes": items,
    }
    conn.execute(
        insert(deliveries).values(
            subscriber=sub.name,
            outbox_id=row.outbox_id,
            message_id=mid,
            source=row.source,
            topic="digest",
            body=json.dumps(body, ensure_ascii=False),
            status="pending",
            attempts=0,
            next_attempt_at=start + span,
            created_at=now_us,
        )
    )
    return 1
