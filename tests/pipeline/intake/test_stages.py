"""Stages (pipeline/intake/stages.py): named calls run ahead of the step that needs them."""

from __future__ import annotations

import threading
import time

import pytest

from feedledger.pipeline.intake.stages import Stage, Stages


def test_a_stage_runs_in_its_own_named_thread_and_gives_its_result() -> None:
    with Stages() as stages:
        seen = stages.start("probe", lambda: threading.current_thread().name)
        assert seen.result() == "feedledger-probe"
        assert seen.result() == "feedledger-probe"  # taken once, kept


def test_a_stage_error_is_raised_where_its_result_is_taken() -> None:
    def broken() -> int:
        raise ValueError("no such payload")

    with Stages() as stages:
        failing = stages.start("broken", broken)
        with pytest.raises(ValueError, match="no such payload"):
            failing.result()


def test_leaving_the_block_waits_for_every_stage_not_taken() -> None:
    done: list[str] = []

    def slow(name: str) -> None:
        time.sleep(0.05)
        done.append(name)

    with pytest.raises(RuntimeError), Stages() as stages:
        stages.start("a", slow, "a")
        stages.start("b", slow, "b")
        raise RuntimeError("the caller's own error")
    assert sorted(done) == ["a", "b"]  # nothing outlives the block
    assert not [t for t in threading.enumerate() if t.name in ("feedledger-a", "feedledger-b")]


def test_a_stage_left_alone_drops_its_error() -> None:
    def broken() -> None:
        raise OSError("disk full")

    with Stages() as stages:
        stages.start("ignored", broken)  # the caller left without its result


def test_a_lone_stage_can_be_waited_for() -> None:
    ran = threading.Event()
    stage = Stage("lone", ran.set)
    stage.wait()
    assert ran.is_set()
