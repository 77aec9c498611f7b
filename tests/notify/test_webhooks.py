"""Notifications end to end through the CLI, on SQLite and PostgreSQL, against real HTTP
receivers on 127.0.0.1: Standard Webhooks signatures, retries with stable message ids,
Retry-After, redelivery after a crash between sending and marking, dead letters and
`notify retry`, what a backfill / retraction / correction announces, slow subscribers,
source filters, file subscribers, removal, and bad input. No message is ever lost or
duplicated in the store (`deliveries`). Scenario helpers: pipeline/test_backfill.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
import socket
import time
from collections import Counter
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.faults import ENV as FAULT_ENV
from feedledger.faults import InjectedFailure
from feedledger.ledger.store import Store
from feedledger.notify.tables import deliveries
from helpers import Cli, write_csv
from notify.receivers import Hit, Receiver, Reply, dispatch, file_lines, live_payload, serve
from pipeline.backfill_scenario import (
    ARCHIVED,
    KEY,
    LIVE,
    OTHER,
    SRC,
    at,
    backfill,
    declare,
    ingest_args,
    outage,
    outbox_rows,
)

# -- a real webhook receiver --------------------------------------------------------------


def free_port() -> int:
    """A port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- helpers -------------------------------------------------------------------------------


def status_of(cli: Cli) -> dict[str, dict[str, Any]]:
    return {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}


def counts(entry: dict[str, Any]) -> tuple[int, ...]:
    """(pending, failed, delivered, dead, cancelled)"""
    return tuple(entry[k] for k in ("pending", "failed", "delivered", "dead", "cancelled"))


def delivery_rows(ws: Workspace) -> list[Any]:
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(deliveries).order_by(deliveries.c.delivery_id)))
    finally:
        store.close()


def assert_ledger(ws: Workspace, expected: dict[str, int]) -> list[Any]:
    """Exactly the expected number of messages per subscriber, no message id twice."""
    rows = delivery_rows(ws)
    per = Counter(r.subscriber for r in rows)
    assert dict(per) == expected
    for name in expected:
        ids = [r.message_id for r in rows if r.subscriber == name]
        assert len(ids) == len(set(ids)), f"duplicate message ids for {name}"
        assert all(i.startswith("msg_") for i in ids)
    return rows


def add_webhook(cli: Cli, name: str, url: str, *extra: str) -> Any:
    return cli("subscriber", "add", name, "--webhook", url, *extra)


def signature(key: bytes, hit: Hit) -> str:
    signed = f"{hit.id}.{hit.headers['webhook-timestamp']}.".encode() + hit.body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_with(key: bytes, hit: Hit) -> bool:
    return signature(key, hit) in hit.headers.get("webhook-signature", "").split()


def by_id(hits: list[Hit]) -> dict[str, list[Hit]]:
    out: dict[str, list[Hit]] = {}
    for h in hits:
        out.setdefault(h.id, []).append(h)
    return out


# -- 1. signatures ----------------------------------------------------------------------


def test_signatures_verify_with_the_standard_webhooks_algorithm(
    cli: Cli, tmp_path: Path, receivers: list[Receiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    raw_key = bytes(range(7, 39))  # 32 bytes
    whsec = "whsec_" + base64.b64encode(raw_key).decode()
    plain = "pläin secret, not base64 ✓"
    monkeypatch.setenv("FL_TEST_WHSEC", whsec)
    monkeypatch.setenv("FL_TEST_PLAIN", plain)
    declare(cli)
    a, b = serve(receivers), serve(receivers)
    for name, r, var in (("std", a, "FL_TEST_WHSEC"), ("plain", b, "FL_TEST_PLAIN")):
        added = add_webhook(cli, name, r.url, "--secret-env", var)
        assert "warning" not in added.stderr
    listed = {s["name"]: s for s in cli.json("subscriber", "list")}
    assert listed["std"]["secret_env"] == "FL_TEST_WHSEC"
    assert whsec not in json.dumps(listed) and plain not in json.dumps(listed)  # names only
    # non-ASCII attributes: the signature covers the exact bytes sent
    csv = write_csv(
        tmp_path / "larimer_2026-08-02.csv",
        ["parcel", "zoning", "owner"],
        [[KEY, "R-0", "Zoë Müller"], [OTHER, "A", "x"]],
    )
    cli("ingest", SRC, str(csv), "--published-at", "2026-08-02")

    before = int(time.time())
    report = dispatch(cli)
    after = int(time.time())
    assert report["messages_created"] == 4
    assert (report["attempted"], report["delivered"], report["failed"]) == (4, 4, 0)
    assert report["errors"] == {}

    checks = ((a, base64.b64decode(whsec.removeprefix("whsec_")), whsec.encode()),)
    checks += ((b, plain.encode("utf-8"), None),)
    for receiver, key, wrong in checks:
        assert len(receiver.hits) == 2
        for hit in receiver.hits:
            assert hit.id.startswith("msg_")
            assert hit.headers["content-type"].startswith("application/json")
            assert hit.headers["webhook-signature"].startswith("v1,")
            assert signed_with(key, hit), hit.headers
            if wrong is not None:  # the whsec_ prefix and base64 are not the key
                assert not signed_with(wrong, hit)
            assert not signed_with(b"some other key", hit)
            stamp = int(hit.headers["webhook-timestamp"])
            assert before - 5 <= stamp <= after + 5  # recent, in Unix seconds
            assert hit.json["type"] == "change"
    owners = {h.json["after"]["owner"] for h in a.hits}
    assert owners == {"Zoë Müller", "x"}
    # the same message (id and body) goes to each subscriber, signed with its own key
    assert {h.id: h.body for h in a.hits} == {h.id: h.body for h in b.hits}
    assert_ledger(cli.ws, {"std": 2, "plain": 2})


# -- 2. retries --------------------------------------------------------------------------


def test_receiver_failing_twice_gets_the_same_message_until_it_succeeds(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    live_payload(cli, tmp_path)
    flaky = serve(receivers, Reply(503), Reply(503), Reply(204))
    add_webhook(cli, "flaky", flaky.url)

    first = dispatch(cli)
    assert (first["messages_created"], first["attempted"], first["failed"]) == (2, 2, 2)
    assert first["delivered"] == 0 and first["errors"] == {"flaky": "HTTP 503"}
    entry = status_of(cli)["flaky"]
    assert counts(entry) == (0, 2, 0, 0, 0)
    assert entry["oldest_pending_age_s"] is not None and entry["oldest_pending_age_s"] >= 0
    second = dispatch(cli)
    assert (second["messages_created"], second["attempted"], second["failed"]) == (0, 2, 2)
    third = dispatch(cli)
    assert (third["attempted"], third["delivered"], third["failed"], third["dead"]) == (2, 2, 0, 0)
    assert third["errors"] == {}
    assert dispatch(cli)["attempted"] == 0  # delivered: never sent again

    sent = by_id(flaky.hits)
    assert len(sent) == 2 and len(flaky.hits) == 6
    for hits in sent.values():
        assert [h.answered for h in hits] == [503, 503, 204]
        assert len({h.body for h in hits}) == 1  # same id, same body, every attempt
    entry = status_of(cli)["flaky"]
    assert counts(entry) == (0, 0, 2, 0, 0) and entry["oldest_pending_age_s"] is None
    rows = assert_ledger(cli.ws, {"flaky": 2})
    assert {r.message_id for r in rows} == set(sent)
    assert [(r.status, r.attempts, r.last_status, r.last_error) for r in rows] == [
        ("delivered", 3, 204, None)
    ] * 2


def test_retry_after_postpones_the_next_attempt(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    live_payload(cli, tmp_path)
    seconds = serve(receivers, Reply(503, (("Retry-After", "120"),)), Reply(204))
    date = formatdate(time.time() + 7200, usegmt=True)
    dated = serve(receivers, Reply(429, (("Retry-After", date),)), Reply(204))
    add_webhook(cli, "seconds", seconds.url)
    add_webhook(cli, "dated", dated.url)

    asked = time.time()
    first = dispatch(cli)  # --backoff 0: only Retry-After delays the retry
    assert (first["attempted"], first["failed"]) == (4, 4)
    assert first["errors"] == {"seconds": "HTTP 503", "dated": "HTTP 429"}
    later = {r.subscriber: [] for r in delivery_rows(cli.ws)}
    for r in delivery_rows(cli.ws):
        later[r.subscriber].append((r.next_attempt_at / 1e6) - asked)
    assert min(later["seconds"]) >= 100
    assert min(later["dated"]) >= 7000
    again = dispatch(cli)
    assert again["attempted"] == 0  # not due yet
    assert len(seconds.hits) == 2 and len(dated.hits) == 2
    assert counts(status_of(cli)["seconds"]) == (0, 2, 0, 0, 0)
    assert_ledger(cli.ws, {"seconds": 2, "dated": 2})


# -- 3. crash between sending and marking ------------------------------------------------


@pytest.mark.parametrize("fault", ["kill", "raise"])
def test_dispatch_dying_after_the_post_resends_the_same_ids(
    cli: Cli,
    tmp_path: Path,
    receivers: list[Receiver],
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    live_payload(cli, tmp_path)
    hook = serve(receivers)
    add_webhook(cli, "hook", hook.url)
    lines = tmp_path / "out" / "messages.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))

    if fault == "kill":
        killed = cli.proc(
            "notify", "dispatch", "--once", "--json", env={FAULT_ENV: "after_send:kill"}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    else:
        monkeypatch.setenv(FAULT_ENV, "after_send")
        failed = cli("notify", "dispatch", "--once", "--json", expect=None)
        monkeypatch.delenv(FAULT_ENV)
        assert isinstance(failed.exception, InjectedFailure), failed.exception
    first_ids = hook.ids()
    assert len(first_ids) == 2 and len(set(first_ids)) == 2
    assert sorted(line["webhook-id"] for line in file_lines(lines)) == sorted(first_ids)
    # sent but never marked: still pending
    status = status_of(cli)
    assert counts(status["hook"]) == counts(status["lines"]) == (2, 0, 0, 0, 0)

    report = dispatch(cli)
    assert report["messages_created"] == 0  # the fan-out had committed
    assert (report["attempted"], report["delivered"]) == (4, 4)
    assert Counter(hook.ids()) == {i: 2 for i in first_ids}  # the receiver can deduplicate
    for hits in by_id(hook.hits).values():
        assert len({h.body for h in hits}) == 1
    written = file_lines(lines)
    assert Counter(line["webhook-id"] for line in written) == {i: 2 for i in first_ids}
    assert written[:2] == written[2:]
    assert dispatch(cli)["attempted"] == 0  # now marked: no third copy
    assert len(hook.hits) == 4
    assert_ledger(cli.ws, {"hook": 2, "lines": 2})


# -- 4. dead letters ------------------------------------------------------------------------


def test_dead_receiver_is_dead_lettered_then_retried_with_the_same_ids(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    live_payload(cli, tmp_path)
    port = free_port()
    add_webhook(cli, "down", f"http://127.0.0.1:{port}/hook")
    limits = ("--max-attempts", "3")

    for _ in range(2):
        report = dispatch(cli, *limits)
        assert (report["attempted"], report["failed"], report["dead"]) == (2, 2, 0)
        assert report["errors"]["down"].startswith("ConnectError")
    last = dispatch(cli, *limits)
    assert (last["attempted"], last["failed"], last["dead"], last["delivered"]) == (2, 0, 2, 0)
    assert dispatch(cli, *limits)["attempted"] == 0  # dead: no more attempts
    entry = status_of(cli)["down"]
    assert counts(entry) == (0, 0, 0, 2, 0)
    rows = assert_ledger(cli.ws, {"down": 2})
    assert all(r.attempts == 3 and r.last_error.startswith("ConnectError") for r in rows)
    ids = {r.message_id for r in rows}

    back = serve(receivers, port=port)  # the receiver comes back
    assert cli.json("notify", "retry", "--subscriber", "down")["requeued"] == 2
    assert counts(status_of(cli)["down"]) == (2, 0, 0, 0, 0)
    report = dispatch(cli, *limits)
    assert (report["attempted"], report["delivered"], report["messages_created"]) == (2, 2, 0)
    assert set(back.ids()) == ids and len(back.hits) == 2
    assert counts(status_of(cli)["down"]) == (0, 0, 2, 0, 0)
    assert cli.json("notify", "retry")["requeued"] == 0
    assert {r.message_id for r in assert_ledger(cli.ws, {"down": 2})} == ids


# -- 5. what gets announced ----------------------------------------------------------------


def test_backfill_sends_one_summary_live_changes_and_notices_one_each(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    live = outage(cli, tmp_path)
    hook = serve(receivers)
    add_webhook(cli, "hook", hook.url)

    def new_messages(expected: int) -> list[Any]:
        seen = len(hook.hits)
        report = dispatch(cli)
        assert report["messages_created"] == expected
        assert (report["attempted"], report["delivered"]) == (expected, expected)
        return hook.bodies()[seen:]

    # the live run of 08-02: one message per change
    changes = sorted(new_messages(2), key=lambda b: b["key"])
    assert [(b["key"], b["change"], b["before"], b["after"]) for b in changes] == [
        ([KEY], "added", None, {"owner": "county", "parcel": KEY, "zoning": "R-0"}),
        ([OTHER], "added", None, {"owner": "x", "parcel": OTHER, "zoning": "A"}),
    ]
    for b in changes:
        assert b["type"] == "change" and b["source"] == SRC and b["backfill"] is False
        assert (b["run_id"], b["payload_id"]) == (live["run_id"], live["payload_id"])
        assert b["valid_from"] == at(LIVE[0]) and b["recorded_at"] == live["recorded_at"]

    # the backfill: its per-payload rows are never sent, ONE summary is
    run = backfill(cli)
    (summary,) = new_messages(1)
    assert summary["type"] == "summary" and summary["source"] == SRC
    assert summary["run_id"] == run["run_id"] and summary["text"] == run["summary"]
    assert summary["changes"] == len(ARCHIVED)
    assert dispatch(cli)["attempted"] == 0
    mine = [(r.topic, r.status) for r in outbox_rows(cli.ws) if r.run_id == run["run_id"]]
    assert mine == [("changes", "suppressed")] * 3 + [("summary", "dispatched")]

    # the next live run: MU-3 (the backfill's last state) -> MU-4, before/after exact
    later = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
    (change,) = new_messages(1)
    assert change["type"] == "change" and change["change"] == "changed"
    assert change["key"] == [KEY] and change["backfill"] is False
    assert change["before"] == {"owner": "county", "parcel": KEY, "zoning": "MU-3"}
    assert change["after"] == {"owner": "county", "parcel": KEY, "zoning": "MU-4"}
    assert (change["run_id"], change["valid_from"]) == (later["run_id"], at("2026-08-12"))

    # retracting that run: one retraction message
    retraction = cli.json("retract", later["run_id"])
    (notice,) = new_messages(1)
    assert notice["type"] == "retraction" and notice["source"] == SRC
    assert notice["run_id"] == retraction["run_id"]
    assert notice["retracted_runs"] == [later["run_id"]]

    # a correction naming the first live run: exactly one message
    text = "the 08-02 zoning of 0714-22-1 was announced wrongly"
    queued = cli.json("notify", "correction", live["run_id"], "--message", text)
    assert queued["queued"] is True
    (correction,) = new_messages(1)
    assert correction["type"] == "correction" and correction["source"] == SRC
    assert correction["corrects_run_id"] == live["run_id"] and correction["text"] == text
    unknown = cli("notify", "correction", "no-such-run", "--message", "x", expect=3)
    assert "no-such-run" in unknown.stderr

    assert not [b for b in hook.bodies() if b.get("backfill")]
    assert Counter(b["type"] for b in hook.bodies()) == {
        "change": 3,
        "summary": 1,
        "retraction": 1,
        "correction": 1,
    }
    assert len(set(hook.ids())) == len(hook.hits) == 6
    rows = assert_ledger(cli.ws, {"hook": 6})
    assert {r.message_id for r in rows} == set(hook.ids())
    assert {r.status for r in rows} == {"delivered"}
    assert status_of(cli)["hook"]["delivered"] == 6


# -- 6. a slow subscriber holds up no other --------------------------------------------------


def test_hanging_subscriber_times_out_without_holding_up_the_others(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    live_payload(cli, tmp_path)
    slow = serve(receivers, Reply(204, delay=3.0))
    fast = serve(receivers)
    add_webhook(cli, "slow", slow.url)
    add_webhook(cli, "fast", fast.url)

    report = dispatch(cli, "--timeout", "0.5", "--concurrency", "1")
    assert (report["attempted"], report["delivered"], report["failed"]) == (4, 2, 2), (
        report,
        status_of(cli),
    )
    assert "Timeout" in report["errors"]["slow"] and "fast" not in report["errors"]
    rows = assert_ledger(cli.ws, {"slow": 2, "fast": 2})
    assert sorted(fast.ids()) == sorted(r.message_id for r in rows if r.subscriber == "fast")
    assert sorted(fast.ids()) == sorted(r.message_id for r in rows if r.subscriber == "slow")
    status = status_of(cli)
    assert counts(status["fast"]) == (0, 0, 2, 0, 0)
    assert counts(status["slow"]) == (0, 2, 0, 0, 0)
    assert {r.last_error.split(":")[0] for r in rows if r.subscriber == "slow"} == {"ReadTimeout"}


# -- 7. filters, file subscribers, removal ---------------------------------------------------


def test_source_filters_file_subscribers_and_removal(
    cli: Cli, tmp_path: Path, receivers: list[Receiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    cli("source", "add", "weld", "--key", "id")
    lar, every = serve(receivers, Reply(200)), serve(receivers, Reply(204))
    lines = tmp_path / "messages.jsonl"
    add_webhook(cli, "lar", lar.url, "--sources", SRC)
    add_webhook(cli, "all", every.url)
    cli("subscriber", "add", "jsonl", "--file", str(lines), "--sources", f"{SRC},weld")
    add_webhook(cli, "gone", f"http://127.0.0.1:{free_port()}/hook")
    listed = {s["name"]: s for s in cli.json("subscriber", "list")}
    assert list(listed) == ["all", "gone", "jsonl", "lar"]
    assert (listed["lar"]["sources"], listed["all"]["sources"]) == ([SRC], None)
    assert listed["jsonl"]["kind"] == "file" and listed["jsonl"]["sources"] == [SRC, "weld"]

    def weld(day: str, value: str) -> None:
        path = write_csv(tmp_path / f"weld_{day}.csv", ["id", "v"], [["1", value]])
        cli("ingest", "weld", str(path), "--published-at", day)

    cli(*ingest_args(tmp_path, *LIVE))
    weld("2026-08-02", "a")
    first = dispatch(cli, "--max-attempts", "1")  # "gone" is dead at once
    assert first["messages_created"] == 2 + 3 + 3 + 3
    assert (first["delivered"], first["dead"]) == (8, 3)
    assert {b["source"] for b in lar.bodies()} == {SRC} and len(lar.hits) == 2
    assert Counter(b["source"] for b in every.bodies()) == {SRC: 2, "weld": 1}
    # the file subscriber gets the same messages (ids and bodies) as the webhook one
    written = file_lines(lines)
    assert len(written) == len(every.hits) == 3
    assert {w["webhook-id"]: w["body"] for w in written} == {h.id: h.json for h in every.hits}
    assert set(lar.ids()) == {h.id for h in every.hits if h.json["source"] == SRC}

    weld("2026-08-03", "b")
    second = dispatch(cli, backoff="60")
    assert (second["messages_created"], second["delivered"], second["failed"]) == (3, 2, 1)
    assert len(lar.hits) == 2  # not its source

    cli(*ingest_args(tmp_path, "2026-08-04", "R-1"))
    monkeypatch.setenv(FAULT_ENV, "after_send")  # sent, never marked: pending
    crashed = cli("notify", "dispatch", "--once", "--json", expect=None)
    monkeypatch.delenv(FAULT_ENV)
    assert isinstance(crashed.exception, InjectedFailure)
    assert counts(status_of(cli)["gone"]) == (1, 1, 0, 3, 0)

    removed = cli.json("subscriber", "remove", "gone")
    assert removed["cancelled"] == 5
    status = status_of(cli)
    assert counts(status["gone"]) == (0, 0, 0, 0, 5)
    assert counts(status["lar"]) == (1, 0, 2, 0, 0)
    assert [s["name"] for s in cli.json("subscriber", "list")] == ["all", "jsonl", "lar"]
    report = dispatch(cli)
    assert (report["messages_created"], report["attempted"], report["delivered"]) == (0, 3, 3)
    cli("notify", "retry", "--subscriber", "gone", expect=3)
    cli("subscriber", "remove", "gone", expect=3)
    weld("2026-08-04", "c")
    assert dispatch(cli)["messages_created"] == 2  # all, jsonl; nothing for "gone"

    rows = assert_ledger(cli.ws, {"lar": 3, "all": 6, "jsonl": 6, "gone": 5})
    assert {r.status for r in rows if r.subscriber == "gone"} == {"cancelled"}
    assert {r.status for r in rows if r.subscriber != "gone"} == {"delivered"}
    assert {r.source for r in rows if r.subscriber == "lar"} == {SRC}
    answered = {(r.subscriber, r.last_status) for r in rows if r.subscriber != "gone"}
    assert answered == {("lar", 200), ("all", 204), ("jsonl", None)}  # each its own answer
    # the same message ids for every subscriber that wants the message
    ids = {n: {r.message_id for r in rows if r.subscriber == n} for n in ("lar", "all", "jsonl")}
    assert ids["all"] == ids["jsonl"] and ids["lar"] < ids["all"]
    assert {w["webhook-id"] for w in file_lines(lines)} == ids["jsonl"]


# -- 8. bad input ----------------------------------------------------------------------------


def test_subscriber_commands_refuse_bad_requests(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    hook = "http://127.0.0.1:9/hook"
    out = str(tmp_path / "m.jsonl")
    refused = cli(
        "subscriber", "add", "s1", "--webhook", hook, "--sources", f"{SRC},nope", expect=2
    )
    assert "nope" in refused.stderr
    cli("subscriber", "add", "s1", "--webhook", hook, "--file", out, expect=2)
    cli("subscriber", "add", "s1", expect=2)
    cli("subscriber", "add", "s1", "--webhook", "ftp://127.0.0.1/x", expect=2)
    assert cli.json("subscriber", "list") == []

    monkeypatch.delenv("FL_TEST_NEVER_SET", raising=False)
    warned = cli("subscriber", "add", "s1", "--webhook", hook, "--secret-env", "FL_TEST_NEVER_SET")
    assert "warning" in warned.stderr and "FL_TEST_NEVER_SET" in warned.stderr
    assert cli("subscriber", "add", "s1", "--file", out, expect=2).stderr
    assert [s["name"] for s in cli.json("subscriber", "list")] == ["s1"]
    cli("subscriber", "remove", "nobody", expect=3)
    cli("notify", "retry", "--subscriber", "nobody", expect=3)
    cli("notify", "correction", "no-such-run", "--message", "x", expect=3)
    assert cli.json("notify", "status")["subscribers"][0]["subscriber"] == "s1"


def test_failures_are_recorded_never_crash_and_nothing_is_lost(
    cli: Cli, tmp_path: Path, receivers: list[Receiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    live_payload(cli, tmp_path)
    error = serve(receivers, Reply(500), Reply(204))
    slow = serve(receivers, Reply(204, delay=3.0), Reply(204))
    late = serve(receivers)
    monkeypatch.delenv("FL_TEST_LATE_SECRET", raising=False)
    add_webhook(cli, "refused", f"http://127.0.0.1:{free_port()}/hook")
    add_webhook(cli, "error", error.url)
    add_webhook(cli, "slow", slow.url)
    add_webhook(cli, "late", late.url, "--secret-env", "FL_TEST_LATE_SECRET")

    report = dispatch(cli, "--timeout", "0.5")
    assert report["messages_created"] == 8
    assert (report["attempted"], report["failed"], report["delivered"]) == (8, 8, 0)
    errors = report["errors"]
    assert errors["refused"].startswith("ConnectError")
    assert errors["error"] == "HTTP 500"
    assert "Timeout" in errors["slow"]
    assert "FL_TEST_LATE_SECRET" in errors["late"] and "not set" in errors["late"]
    assert late.hits == []  # nothing sent unsigned
    rows = assert_ledger(cli.ws, dict.fromkeys(("refused", "error", "slow", "late"), 2))
    recorded = {(r.subscriber, r.status, r.attempts, r.last_status) for r in rows}
    assert recorded == {
        ("refused", "failed", 1, None),
        ("error", "failed", 1, 500),
        ("slow", "failed", 1, None),
        ("late", "failed", 1, None),
    }
    assert {r.subscriber: r.last_error for r in rows} == errors
    assert all(counts(s) == (0, 2, 0, 0, 0) for s in status_of(cli).values())

    monkeypatch.setenv("FL_TEST_LATE_SECRET", "s3cret")
    again = dispatch(cli, "--timeout", "5")
    assert (again["attempted"], again["delivered"], again["failed"]) == (8, 6, 2)
    assert list(again["errors"]) == ["refused"]
    assert len(late.hits) == 2 and all(signed_with(b"s3cret", h) for h in late.hits)
    assert Counter(error.ids()) == dict.fromkeys(late.ids(), 2)
    rows = assert_ledger(cli.ws, dict.fromkeys(("refused", "error", "slow", "late"), 2))
    assert Counter(r.status for r in rows) == {"delivered": 6, "failed": 2}
    assert cli.json("notify", "status")["outbox"] == {"dispatched": 1}


def test_malformed_webhook_url_is_refused_or_a_recorded_failure(
    cli: Cli, tmp_path: Path, receivers: list[Receiver]
) -> None:
    """`subscriber add` checks only the scheme; a URL it lets through must fail like any
    unreachable one, not abort the dispatch for every subscriber."""
    live_payload(cli, tmp_path)
    good = serve(receivers)
    lines = tmp_path / "messages.jsonl"
    add_webhook(cli, "good", good.url)
    cli("subscriber", "add", "lines", "--file", str(lines))
    added = cli("subscriber", "add", "bad", "--webhook", "http://127.0.0.1:99999/hook", expect=None)
    if added.exit_code != 0:  # refused up front: fine
        assert added.exit_code == 2, added.stderr
        assert dispatch(cli)["delivered"] == 4
        return
    result = cli("notify", "dispatch", "--once", "--backoff", "0", "--json", expect=None)
    assert result.exit_code == 0, (result.exception, result.stderr)
    report = json.loads(result.stdout)
    assert (report["attempted"], report["delivered"], report["failed"]) == (6, 4, 2)
    assert "bad" in report["errors"]
    dispatch(cli)  # the healthy subscribers are not sent the same messages again
    assert len(good.hits) == 2 and len(file_lines(lines)) == 2
    rows = assert_ledger(cli.ws, {"good": 2, "lines": 2, "bad": 2})
    assert {r.status for r in rows if r.subscriber != "bad"} == {"delivered"}


def test_payload_applied_again_after_its_retraction_is_announced_again(
    cli: Cli, tmp_path: Path
) -> None:
    """Retract a live run, then ingest its payload again (the way a retracted run is
    redone): a new change set, announced after the retraction, and the dispatcher must
    carry on."""
    live_payload(cli, tmp_path)
    lines = tmp_path / "messages.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))
    assert dispatch(cli)["delivered"] == 2
    first = cli.json(*ingest_args(tmp_path, "2026-08-04", "R-1"))
    assert dispatch(cli)["delivered"] == 1
    cli.json("retract", first["run_id"])
    redo = cli.json(*ingest_args(tmp_path, "2026-08-04", "R-1"))
    assert redo["status"] == "applied" and redo["changes"] == 1

    result = cli("notify", "dispatch", "--once", "--backoff", "0", "--json", expect=None)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["delivered"] == 2  # the retraction, the new change
    written = file_lines(lines)
    assert [w["body"]["type"] for w in written][-2:] == ["retraction", "change"]
    original = next(w for w in written if w["body"].get("run_id") == first["run_id"])
    again = next(w for w in written if w["body"].get("run_id") == redo["run_id"])
    # another application is another message: a receiver deduplicating by webhook-id
    # must not drop it as a copy of the retracted one
    assert again["webhook-id"] != original["webhook-id"]
    assert cli.json("notify", "status")["outbox"] == {"dispatched": 4}
    assert_ledger(cli.ws, {"lines": 5})
