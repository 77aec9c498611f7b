"""feedledger.ahead: work run in a thread ahead of its reader (the snapshot's fetch,
per-key pass and HTTP writer): order kept, errors raised in the reader at their place,
a reader that stops early stops the worker, the queue bounds how far ahead it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from feedledger.ahead import Stopped, ahead, run_ahead

HANG_S = 60  # a generous deadline against a hang, never a timing assertion


def test_items_arrive_in_order_from_another_thread() -> None:
    seen: list[str] = []

    def items() -> Iterator[int]:
        for i in range(100):
            seen.append(threading.current_thread().name)
            yield i

    assert list(ahead(items(), depth=3, name="t-ahead")) == list(range(100))
    assert set(seen) == {"t-ahead"}


def test_an_error_is_raised_in_the_reader_after_what_came_before() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("boom")

    got: list[int] = []
    with pytest.raises(ValueError, match="boom"):
        for item in ahead(items()):
            got.append(item)
    assert got == [1, 2]


def test_a_reader_that_stops_stops_the_worker_and_closes_the_source() -> None:
    closed = threading.Event()
    made: list[int] = []

    def items() -> Iterator[int]:
        try:
            i = 0
            while True:
                made.append(i)
                yield i
                i += 1
        finally:
            closed.set()

    stream = ahead(items(), depth=2)
    assert next(stream) == 0
    stream.close()
    assert closed.wait(HANG_S)
    # bounded: the worker ran at most the queue's depth (and the one in hand) ahead
    assert len(made) <= 1 + 2 + 2


def test_run_ahead_put_raises_stopped_once_the_reader_is_gone() -> None:
    ended: list[str] = []

    def work(put: Callable[[int], None]) -> None:
        try:
            for i in range(10_000):
                put(i)
        except Stopped:
            ended.append("stopped")
            raise

    stream = run_ahead(work, depth=1)
    assert next(stream) == 0
    stream.close()  # joins the worker
    assert ended == ["stopped"]


def test_a_stream_never_read_starts_no_thread() -> None:
    started = threading.Event()

    def work(put: Callable[[int], None]) -> None:
        started.set()

    stream = run_ahead(work)
    stream.close()
    assert not started.is_set()
