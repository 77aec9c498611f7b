"""A budgeted source's process has polars' allocator give freed memory back at once
(set before polars is loaded, never over the environment's own setting), and a source
without a budget leaves the allocators as they are (pipeline/intake/allocators.py)."""

from __future__ import annotations

import sys

import pytest

from feedledger.config import make_source
from feedledger.pipeline.intake import allocators

BUDGETED = make_source("b", key=("id",), memory_budget="64MiB")
WHOLE = make_source("w", key=("id",))


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A process that has not released anything yet, without the allocator's setting
    in its environment (restored after the test)."""
    monkeypatch.setattr(allocators, "_released", False)
    monkeypatch.delenv(allocators.JEMALLOC_ENV, raising=False)
    return monkeypatch


def test_a_budgeted_source_sets_polars_allocator_when_polars_is_not_loaded_yet(
    fresh: pytest.MonkeyPatch,
) -> None:
    fresh.delitem(sys.modules, "polars", raising=False)
    assert allocators.release_promptly(BUDGETED)
    assert allocators.os.environ[allocators.JEMALLOC_ENV] == allocators.PROMPT_DECAY
    # once per process
    assert not allocators.release_promptly(BUDGETED)


def test_polars_already_loaded_or_the_environment_setting_is_left_as_it_is(
    fresh: pytest.MonkeyPatch,
) -> None:
    import polars  # noqa: F401 - loaded: its allocator has read its setting already

    before = allocators.os.environ.get(allocators.JEMALLOC_ENV)
    allocators.release_promptly(BUDGETED)
    assert allocators.os.environ.get(allocators.JEMALLOC_ENV) == before
    fresh.setattr(allocators, "_released", False)
    fresh.setenv(allocators.JEMALLOC_ENV, "dirty_decay_ms:5000")
    fresh.delitem(sys.modules, "polars")
    allocators.release_promptly(BUDGETED)
    assert allocators.os.environ[allocators.JEMALLOC_ENV] == "dirty_decay_ms:5000"


def test_a_source_without_a_budget_leaves_the_allocators_alone(
    fresh: pytest.MonkeyPatch,
) -> None:
    fresh.delitem(sys.modules, "polars", raising=False)
    assert not allocators.release_promptly(WHOLE)
    assert allocators.JEMALLOC_ENV not in allocators.os.environ
    assert not allocators._released


def test_a_large_budget_leaves_polars_allocator_as_it_is(fresh: pytest.MonkeyPatch) -> None:
    fresh.delitem(sys.modules, "polars", raising=False)
    large = make_source("l", key=("id",), memory_budget="1GiB")
    allocators.release_promptly(large)
    assert allocators.JEMALLOC_ENV not in allocators.os.environ


def test_glibc_returns_memory_at_once_only_under_a_budget_of_the_source_s_own(
    fresh: pytest.MonkeyPatch,
) -> None:
    """The default bound (`within_default`'s budget) keeps glibc's thresholds: its big
    blocks are reused, not mapped, faulted and unmapped again a batch at a time."""
    asked: list[bool] = []
    fresh.setattr(allocators, "_glibc_prompt", lambda: asked.append(True) or True)
    default = make_source("d", key=("id",), memory_budget="1GiB")
    allocators.release_promptly(default, own=False)
    assert asked == []
    fresh.setattr(allocators, "_released", False)
    assert allocators.release_promptly(default)
    assert asked == [True]
