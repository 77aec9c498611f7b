"""Issue 13, notifications and subscribers, on SQLite and PostgreSQL: a retracted run's
undelivered messages are cancelled, never sent, and only those who heard of it hear of
its retraction (item 5); `--secret-env` takes a variable's name, never the secret, and
a stored secret is never echoed (item 18); subscriber names follow the one name rule
(item 19); a webhook failure names its type and cause (item 29)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from conftest import Cli
from feedledger.ledger.schema import subscribers
from feedledger.ledger.store import Store
from test_backfill import declare
from test_notify import dispatch, live_payload

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
