"""A dispatch records the outcome of every message it sent, however late the database
thread gets to it, on SQLite and PostgreSQL. Outcomes are recorded in batches, the
ticker taking one `flush_s` after its first outcome; a dispatch --once ends by cancelling
the ticker. On a loaded machine the database thread may not have started the ticker's
batch by then: that batch must still be recorded, not dropped (a dropped batch left its
messages pending -- sent again next time -- and uncounted in the report: the flaky
`attempted 1` of test_hanging_subscriber_times_out_without_holding_up_the_others).

The starved thread is injected, not awaited by luck: when the ticker takes a batch, the
database thread is kept busy until the ticker has been cancelled.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from feedledger.ledger.store import Store
from feedledger.notify import session as session_mod
from feedledger.notify.dispatch import dispatch
from feedledger.notify.send import Policy
from helpers import Cli, write_csv

SRC = "parcels"
HOLD_S = 30.0  # only a hang detector: every wait below ends on an event


class Receiver:
    """Webhook receiver on 127.0.0.1: the first request is answered at once, later ones
    once `release` is set (at most HOLD_S)."""

    def __init__(self, release: threading.Event) -> None:
        self.hits: list[str] = []
        lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    receiver.hits.append(self.headers["webhook-id"])
                    first = len(receiver.hits) == 1
                if not first:
                    release.wait(HOLD_S)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=lambda: self.server.serve_forever(0.05), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def released() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def starve_the_database_thread_when_the_ticker_takes(
    monkeypatch: pytest.MonkeyPatch, took: threading.Event
) -> Callable[[], bool]:
    """When the ticker takes a batch of outcomes, `took` is set and the database thread
    is kept busy until the ticker has been cancelled (as a starved thread would be).
    Returns whether that happened."""
    tickers: list[asyncio.Task[Any]] = []
    held: list[bool] = []
    tick, take = session_mod.Session.tick, session_mod.Session._take

    async def spied_tick(self: session_mod.Session) -> None:
        task = asyncio.current_task()
        assert task is not None
        tickers.append(task)
        await tick(self)

    def spied_take(self: session_mod.Session) -> list[Any]:
        batch = take(self)
        ticker = tickers[0] if tickers else None
        if batch and not held and asyncio.current_task() is ticker:
            assert ticker is not None

            def busy() -> None:
                deadline = time.monotonic() + HOLD_S
                while not ticker.cancelling() and time.monotonic() < deadline:
                    time.sleep(0.005)
                held.append(bool(ticker.cancelling()))

            self.executor.submit(busy)  # before the batch's own job: it waits behind
            took.set()
        return batch

    monkeypatch.setattr(session_mod.Session, "tick", spied_tick)
    monkeypatch.setattr(session_mod.Session, "_take", spied_take)
    return lambda: held == [True]


def test_a_batch_the_ticker_took_is_recorded_though_the_ticker_is_cancelled_first(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, released: threading.Event
) -> None:
    cli("source", "add", SRC, "--key", "id")
    path = write_csv(tmp_path / "p.csv", ["id", "v"], [["1", "a"], ["2", "b"]])
    cli("ingest", SRC, str(path), "--published-at", "2026-08-01")
    hook = Receiver(released)  # the second message waits until the ticker took the first
    try:
        cli("subscriber", "add", "hook", "--webhook", hook.url)
        starved = starve_the_database_thread_when_the_ticker_takes(monkeypatch, released)
        store = Store(cli.ws.store_url)
        try:
            policy = Policy(concurrency=1, flush_s=0.05, backoff_base_s=0, timeout_s=HOLD_S)
            report = dispatch(store, once=True, policy=policy)
            status = {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}
        finally:
            store.close()
    finally:
        released.set()
        hook.stop()

    # the ticker took the first outcome and was cancelled before its batch was started
    assert starved()
    assert len(hook.hits) == 2 and len(set(hook.hits)) == 2
    assert (report.messages_created, report.attempted, report.delivered) == (2, 2, 2)
    assert (status["hook"]["delivered"], status["hook"]["pending"]) == (2, 0)
    assert status["hook"]["claimed"] == 0
