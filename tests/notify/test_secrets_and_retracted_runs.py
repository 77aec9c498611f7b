"""Notifications and subscribers, on SQLite and PostgreSQL: a retracted run's
undelivered messages are cancelled, never sent, and only those who heard of it hear of
its retraction; `--secret-env` takes a variable's name, never the secret, and
a stored secret is never echoed; subscriber names follow the one name rule
; a webhook failure names its type and cause."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from feedledger.ledger.runs.holders import new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries as deliveries_mod
from feedledger.notify import fanout
from feedledger.notify.deliveries import Outcome
from feedledger.notify.subscriptions import listing
from feedledger.notify.tables import deliveries, subscribers
from helpers import Cli, write_csv
from notify.gated_dispatch import Gated, finish, receiver, spawn, wait_until
from notify.receivers import Receiver, Reply, dispatch, file_lines, live_payload, serve
from pipeline.backfill_scenario import declare, ingest_args

HOLD_S = 600  # a held request outlives any step of the test (only a hang reaches it)
SECRET = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHM="


# -- 18. --secret-env holds a name, never the secret ------------------------------------------


def test_secret_env_refuses_a_secret_without_echoing_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    out = str(tmp_path / "m.jsonl")
    for bad in (SECRET, "1ABC", "MY-VAR", "A B", "", "x=1"):
        refused = cli("subscriber", "add", "s1", "--file", out, "--secret-env", bad, expect=2)
        text = refused.stderr + refused.stdout
        assert "--secret-env must name an environment variable, not hold the secret" in text
        if bad:
            assert bad not in text
    assert cli.json("subscriber", "list") == []
    monkeypatch.setenv("FL_I13_SECRET", SECRET)
    for good in ("FL_I13_SECRET", "_x1"):
        cli("subscriber", "add", f"s-{good.lower()}", "--file", out, "--secret-env", good)
    listed = {s["name"]: s["secret_env"] for s in cli.json("subscriber", "list")}
    assert listed == {"s-fl_i13_secret": "FL_I13_SECRET", "s-_x1": "_x1"}


def test_secret_env_refuses_a_secret_that_is_also_an_identifier(cli: Cli, tmp_path: Path) -> None:
    """A webhook secret can itself be a valid identifier (`whsec_` + base62): refused,
    never echoed, like any other value that is no variable name."""
    declare(cli)
    out = str(tmp_path / "m.jsonl")
    for bad in ("whsec_abc123", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LLLdZ", "sk_live_4eC39HqLyjWD",
                "Ab3dEf7hIj9kLm2nOp5qRs"):  # fmt: skip
        refused = cli("subscriber", "add", "s1", "--file", out, "--secret-env", bad, expect=2)
        text = refused.stderr + refused.stdout
        assert "--secret-env must name an environment variable, not hold the secret" in text
        assert bad not in text
    assert cli.json("subscriber", "list") == []
    cli("subscriber", "add", "s2", "--file", out, "--secret-env", "WEBHOOK_SECRET_2026_PRIMARY")


def test_a_secret_already_stored_is_masked_everywhere(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before the check may hold the secret itself: list (human and
    JSON), dispatch's errors (human and JSON) and status never show it."""
    live_payload(cli, tmp_path)
    monkeypatch.setenv("FL_I13_SECRET", SECRET)
    cli("subscriber", "add", "old", "--webhook", "http://127.0.0.1:9/h", "--secret-env", "X")
    store = Store(cli.ws.store_url)
    try:
        with store.begin() as conn:  # what the old code stored
            conn.execute(update(subscribers).values(secret_env=SECRET))
    finally:
        store.close()
    listed = cli.json("subscriber", "list")
    assert listed[0]["secret_env"] and SECRET not in str(listed)
    assert SECRET not in cli("subscriber", "list").stdout
    human = cli("notify", "dispatch", "--once", "--backoff", "0")
    assert "not an environment variable name" in human.stderr
    assert SECRET not in human.stdout + human.stderr
    report = dispatch(cli)
    assert SECRET not in str(report)
    assert SECRET not in cli("notify", "status").stdout + str(cli.json("notify", "status"))


# -- 19. subscriber names follow the one name rule --------------------------------------------


@pytest.mark.parametrize("name", ["../../x", "a/b", ".hidden", "_x", "a b", "x" * 65, " "])
def test_subscriber_names_are_validated_as_source_names_are(
    cli: Cli, tmp_path: Path, name: str
) -> None:
    declare(cli)
    refused = cli("subscriber", "add", name, "--file", str(tmp_path / "m.jsonl"), expect=2)
    assert "subscriber name" in refused.stderr and "letters, digits" in refused.stderr
    assert cli.json("subscriber", "list") == []
    cli("subscriber", "add", "ok_1.a-b", "--file", str(tmp_path / "m.jsonl"))


# -- 29. a webhook failure names its type and cause --------------------------------------------


@pytest.fixture
def resetting_server() -> Iterator[int]:
    """A webhook on 127.0.0.1 that reads the request, then resets the connection
    (SO_LINGER 0) instead of answering: httpx raises `ReadError` with no message."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\npartial")
                except OSError:
                    pass
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        srv.close()


def test_a_webhook_closing_mid_response_is_named_with_its_cause(
    cli: Cli, tmp_path: Path, resetting_server: int
) -> None:
    live_payload(cli, tmp_path)
    cli("subscriber", "add", "hook", "--webhook", f"http://127.0.0.1:{resetting_server}/h")
    report: dict[str, Any] = dispatch(cli)
    assert report["failed"] == 2
    error = report["errors"]["hook"]
    kind, _, detail = error.partition(": ")
    assert kind in ("ReadError", "RemoteProtocolError") and detail.strip(), error
    assert f"127.0.0.1:{resetting_server}" in detail and "reading the response" in detail
    human = cli("notify", "dispatch", "--once", "--backoff", "0")
    assert f"hook: {kind}: " in human.stderr


def test_describe_walks_the_cause_chain_and_never_is_empty() -> None:
    import httpx

    from feedledger.notify.send import describe

    def chained(outer: BaseException, inner: BaseException | None) -> BaseException:
        try:
            try:
                if inner is not None:
                    raise inner
                raise outer
            except BaseException as exc:
                if exc is outer:
                    raise
                raise outer from exc
        except BaseException as got:
            return got

    reset = chained(httpx.ReadError(""), ConnectionResetError(104, "Connection reset by peer"))
    assert describe(reset, "http://127.0.0.1:8123/h") == (
        "ReadError: [Errno 104] Connection reset by peer (ConnectionResetError) "
        "while reading the response from 127.0.0.1:8123"
    )
    bare = describe(chained(httpx.WriteError(""), None), "https://hooks.example/x")
    assert bare == ("WriteError: no further detail while sending the request to hooks.example:443")
    assert describe(ValueError("bad"), "x") == "ValueError: bad"


# -- 5. a retracted run's undelivered messages are cancelled, never sent ----------------------


def rows_of(cli: Cli) -> list[Any]:
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(deliveries).order_by(deliveries.c.delivery_id)))
    finally:
        store.close()


def test_a_run_retracted_before_dispatch_is_never_announced(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    """The plain case: retracted before any dispatch, its changes (outbox rows never
    fanned out) are cancelled and shown so; nobody heard of it, so nobody hears of its
    retraction."""
    live_payload(cli, tmp_path)
    hook = serve(receivers)
    lines = tmp_path / "lines.jsonl"
    cli("subscriber", "add", "hook", "--webhook", hook.url)
    cli("subscriber", "add", "lines", "--file", str(lines))
    assert dispatch(cli)["delivered"] == 4
    run = cli.json(*ingest_args(tmp_path, "2026-08-04", "R-1"))
    retracted = cli.json("retract", run["run_id"])
    assert (retracted["notifications_cancelled"], retracted["messages_cancelled"]) == (1, 0)
    report = dispatch(cli)
    assert (report["attempted"], report["messages_created"]) == (0, 0)
    assert len(hook.hits) == 2 and len(file_lines(lines)) == 2
    assert not [b for b in hook.bodies() if b["run_id"] in (run["run_id"], retracted["run_id"])]
    status = cli.json("notify", "status")
    assert status["outbox"] == {"dispatched": 2, "cancelled": 1}
    assert {s["subscriber"]: s["cancelled"] for s in status["subscribers"]} == {
        "hook": 1,
        "lines": 1,
    }
    human = cli("notify", "status").stdout
    assert "cancelled" in human and "outbox: cancelled 1, dispatched 2" in human


def test_fanned_out_messages_in_backoff_or_dead_are_cancelled_and_only_hearers_told(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    """Messages already fanned out but not delivered (to retry, or dead) are cancelled
    in the retraction's transaction; the retraction notice goes to the subscriber that
    was delivered them, not to the one that was not."""
    live_payload(cli, tmp_path)
    hook = serve(receivers, Reply(500), Reply(204))  # every message fails once
    lines = tmp_path / "lines.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))
    cli("subscriber", "add", "hook", "--webhook", hook.url)
    dispatch(cli)
    dispatch(cli)  # the live run's 2 messages went through the second time
    run = cli.json(*ingest_args(tmp_path, "2026-08-04", "R-1"))
    report = dispatch(cli, backoff="3600")  # hook: failed, due in an hour or more
    assert (report["delivered"], report["failed"]) == (1, 1)
    late = cli.json(*ingest_args(tmp_path, "2026-08-05", "R-2"))  # its hook message: dead
    assert dispatch(cli, "--max-attempts", "1")["dead"] == 1
    retracted = cli.json("retract", late["run_id"])
    assert retracted["messages_cancelled"] == 1
    retracted2 = cli.json("retract", run["run_id"])
    assert retracted2["messages_cancelled"] == 1
    assert cli.json("notify", "retry")["requeued"] == 0  # cancelled is not dead
    before = len(hook.hits)
    with_time = dispatch(cli)
    assert with_time["delivered"] == 2  # the two notices, to `lines` only
    assert len(hook.hits) == before
    heard = [w["body"] for w in file_lines(lines)]
    assert [b["type"] for b in heard][-2:] == ["retraction", "retraction"]
    for rid in (run["run_id"], late["run_id"]):
        assert sum(b.get("retracted_runs") == [rid] for b in heard) == 1
    mine = [r for r in rows_of(cli) if r.subscriber == "hook"]
    assert [r.status for r in mine] == ["delivered", "delivered", "cancelled", "cancelled"]
    assert all("retracted" in r.last_error for r in mine[2:])
    entry = {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}["hook"]
    assert (entry["pending"], entry["failed"], entry["dead"], entry["cancelled"]) == (0, 0, 0, 2)


def test_a_claimed_message_is_looked_at_again_before_sending(
    cli: Cli, tmp_path: Path, started: list[Gated]
) -> None:
    """A dispatcher (a real process) has claimed all 20 messages of a run and is stuck
    sending the first when the run is retracted: that one goes out (it was on the wire)
    and is recorded delivered; the other 19 are never sent. The retraction notice waits
    for the dispatcher to settle, then goes to the subscriber (it heard of the run)."""
    release = threading.Event()
    # Neither side gives up on the held request before the test releases it, however
    # slow a loaded machine makes the steps between: with the default 10 s timeout the
    # first message would fail, the next ones go out before the retraction, legitimately
    hook = receiver(started, lambda _r: release.is_set(), hold_s=HOLD_S)
    cli("source", "add", CLAIM_SRC, "--key", "id")
    cli("subscriber", "add", "hook", "--webhook", hook.url)
    run = ingest_n(cli, tmp_path, "2026-08-01", 20)
    timeout = str(HOLD_S)
    proc = spawn(
        cli, "notify", "dispatch", "--once", "--concurrency", "1", "--json", "--timeout", timeout
    )
    try:
        wait_until(lambda: len(hook.ids()) == 1, "the first message on the wire")
        entry = {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}
        assert entry["hook"]["claimed"] == 20
        retracted = cli.json("retract", run["run_id"])
        assert retracted["messages_cancelled"] == 20
        store = Store(cli.ws.store_url)
        try:  # the notice waits while a claim on a cancelled message is live
            assert fanout.expand(store, listing(store), now_us()) == 0
        finally:
            store.close()
    finally:
        release.set()
    report = finish(proc)
    assert (report["attempted"], report["delivered"], report["cancelled"]) == (1, 1, 19)
    assert len(hook.ids()) == 1
    statuses = Counter(r.status for r in rows_of(cli))
    assert statuses == {"delivered": 1, "cancelled": 19}
    assert not [r for r in rows_of(cli) if r.claimed_by is not None]
    again = finish(spawn(cli, "notify", "dispatch", "--once", "--json"))
    assert (again["messages_created"], again["delivered"]) == (1, 1)
    assert len(hook.ids()) == 2  # the first change and the retraction notice


def test_the_notice_waits_for_live_claims_and_later_rows_wait_with_it(
    cli: Cli, tmp_path: Path
) -> None:
    """In the store: a live holder's claims on a run's messages survive its retraction;
    until they are settled the retraction notice -- and a later run's changes, so order
    is kept -- stay in the outbox; settled (not sent), nobody is told."""
    cli("source", "add", CLAIM_SRC, "--key", "id")
    cli("subscriber", "add", "lines", "--file", str(tmp_path / "x.jsonl"))
    run = ingest_n(cli, tmp_path, "2026-08-01", 3)
    store = Store(cli.ws.store_url)
    try:
        assert fanout.expand(store, listing(store), now_us()) == 3
        holder, now = new_holder(), now_us()
        got = deliveries_mod.claim(store, "lines", holder, now, now + 60_000_000, 10)
        assert len(got) == 3
        cli.json("retract", run["run_id"])
        ingest_n(cli, tmp_path, "2026-08-02", 2, value="b")
        assert fanout.expand(store, listing(store), now_us()) == 0
        assert deliveries_mod.not_waiting(store, [d.delivery_id for d in got]) == {
            d.delivery_id for d in got
        }
        skipped = [Outcome(d.delivery_id, False, None, None, 0, False, True) for d in got]
        deliveries_mod.record(store, holder, skipped, now_us())
        assert fanout.expand(store, listing(store), now_us()) == 2  # the later run only
    finally:
        store.close()
    assert Counter(r.status for r in rows_of(cli)) == {"cancelled": 3, "pending": 2}
    assert cli.json("notify", "status")["outbox"] == {"dispatched": 3}


def test_pending_digests_lose_the_retracted_changes(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", CLAIM_SRC, "--key", "id")
    cli("subscriber", "add", "dg", "--file", str(tmp_path / "d.jsonl"), "--digest", "daily")
    first = ingest_n(cli, tmp_path, "2026-08-01", 3)
    dispatch(cli)
    second = ingest_n(cli, tmp_path, "2026-08-02", 4, value="b")  # 3 changed, 1 added
    dispatch(cli)
    (digest,) = rows_of(cli)
    assert json.loads(digest.body)["count"] == 7
    cli.json("retract", second["run_id"])
    (digest,) = rows_of(cli)
    body = json.loads(digest.body)
    assert (digest.status, body["count"]) == ("pending", 3)
    assert {c["run_id"] for c in body["changes"]} == {first["run_id"]}
    cli.json("retract", first["run_id"])
    (digest,) = rows_of(cli)
    assert digest.status == "cancelled"
    assert dispatch(cli)["messages_created"] == 0  # nobody heard of either run


CLAIM_SRC = "parcels"


def ingest_n(cli: Cli, tmp_path: Path, day: str, n: int, value: str = "a") -> Any:
    path = write_csv(
        tmp_path / f"{CLAIM_SRC}_{day}.csv", ["id", "v"], [[str(i), value] for i in range(n)]
    )
    return cli.json("ingest", CLAIM_SRC, str(path), "--published-at", day)
