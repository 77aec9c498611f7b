"""Stages: named calls started ahead of the step that needs their result, each in a
thread of its own (`feedledger.ahead`, the one mechanism for work run ahead).

An ingest overlaps its work this way (pipeline/intake/ingest.py): the archive hashes,
compresses and writes the payload's object (`archive`) and the store is opened
(`store`) while the caller parses the payload and diffs it; the caller then takes each
stage's result where it needs it. Both libraries let go of the GIL for most of that
work, so on two cores the stages cost next to nothing in wall time.

    with Stages() as stages:
        storing = stages.start("archive", archive.put_object, data, source)
        ...                       # the caller's own work, meanwhile
        sha = storing.result()    # waits; the stage's exception is raised here

Errors propagate: a stage's exception is raised by `result()`, in the caller. Leaving
the block, however it ends (a refused payload, an error of the caller's own), every
stage not yet taken is waited for and its result dropped -- cancelled, as far as a
call already running can be: nothing a stage started outlives the block.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from contextlib import suppress
from types import TracebackType
from typing import Generic, TypeVar

from feedledger.ahead import run_ahead

__all__ = ["Stage", "Stages"]

T = TypeVar("T")


class Stage(Generic[T]):
    """One call running ahead in a thread of its own since `Stages.start`."""

    def __init__(self, name: str, call: Callable[[], T]) -> None:
        self.name = name
        self._ended = threading.Event()

        def work(put: Callable[[T], None]) -> None:
            try:
                value = call()
            finally:
                self._ended.set()
            put(value)

        self._out: Generator[T, None, None] = run_ahead(
            work, depth=2, name=f"feedledger-{name}", started=True
        )
        self._taken = False
        self._value: T

    def result(self) -> T:
        """What the call returned (waiting for it), or its exception raised here."""
        if not self._taken:
            try:
                self._value = next(self._out)
            finally:
                self._taken = True
                self._out.close()
        return self._value

    def is_alive(self) -> bool:
        """Whether the call is still running (as a thread's `is_alive`)."""
        return not self._ended.is_set()

    def wait(self) -> None:
        """Wait for the call to end, its result or exception dropped."""
        if not self._taken:
            with suppress(Exception):  # cancelled: the caller left without it
                self.result()


class Stages:
    """Stages started together: leaving the block waits for each one (see the module doc)."""

    def __init__(self) -> None:
        self._started: list[Stage[object]] = []

    def start(self, name: str, call: Callable[..., T], *args: object) -> Stage[T]:
        """`call(*args)` started now in a thread named for the stage."""
        stage: Stage[T] = Stage(name, lambda: call(*args))
        self._started.append(stage)  # type: ignore[arg-type]
        return stage

    def __enter__(self) -> Stages:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for stage in self._started:
            stage.wait()
