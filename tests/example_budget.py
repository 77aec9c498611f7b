"""How many examples the heaviest property tests draw: a test's budget here times
FEEDLEDGER_TEST_EXAMPLES (default 1). `make test` keeps the suite within its ~10
minutes with the budgets as written; `make test-thorough` draws five times as many
(FEEDLEDGER_TEST_EXAMPLES=5), for a deeper run before a release or after a change to
the diff, the encoding or replay."""

from __future__ import annotations

import os

ENV = "FEEDLEDGER_TEST_EXAMPLES"


def examples(budget: int) -> int:
    """`budget` examples, scaled by FEEDLEDGER_TEST_EXAMPLES (at least one)."""
    scale = float(os.environ.get(ENV) or 1)
    return max(1, round(budget * scale))
