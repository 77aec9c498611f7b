"""Fixtures of the notify tests: the receivers a test starts (`receivers` for webhook
receivers, `started` for gated ones), stopped at its end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from notify.gated_dispatch import Gated
from notify.receivers import Receiver


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    """Every receiver a test starts (append to the list) is stopped afterwards."""
    started: list[Receiver] = []
    yield started
    for r in started:
        r.stop()


@pytest.fixture
def started() -> Iterator[list[Gated]]:
    servers: list[Gated] = []
    yield servers
    for s in servers:
        s.stop()
