"""A rival worker, with its own context, that does the work at the one moment that
matters: after the caller looked at the ledger and decided there was work, just before
it takes the source's lease. Shared by the lease-recheck and scheduler tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.runs import leases
from feedledger.model.timeutil import to_us

# the scheduler's clock: the evening of the last day of the week (America/Denver)
NOW = to_us(datetime(2026, 8, 11, 18, 0, tzinfo=UTC))


Rival = Callable[[Context], Any]


@contextmanager
def rival_before_lease(
    monkeypatch: pytest.MonkeyPatch, ws: Workspace, rival: Rival
) -> Iterator[list[Any]]:
    """The first `leases.leased_run` anybody asks for first lets `rival` run whole, in a
    context of its own (another worker), then goes on. Yields what the rival returned."""
    real = leases.leased_run
    done: list[Any] = []

    @contextmanager
    def leased_run(*args: Any, **kwargs: Any) -> Iterator[leases.LeasedRun]:
        if not done:
            done.append(None)
            with Context(Workspace.load(ws.config_path)) as other:
                done[0] = rival(other)
        with real(*args, **kwargs) as run:
            yield run

    monkeypatch.setattr(leases, "leased_run", leased_run)
    yield done
    monkeypatch.setattr(leases, "leased_run", real)
