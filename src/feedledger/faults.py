"""Fault injection at named boundaries, for crash tests (never enabled in normal use).

`FEEDLEDGER_FAULT=<point>[:kill]` makes the process raise `InjectedFailure` (or die
at once with SIGKILL when `:kill` is given) when it reaches `<point>`. Points:
`after_archive`, `after_register`, `mid_transaction`, `before_commit`,
`after_commit`, `after_payload:<n>` (after the n-th payload of a run committed).
"""

from __future__ import annotations

import os
import signal

ENV = "FEEDLEDGER_FAULT"


class InjectedFailure(RuntimeError):
    """Raised at an injected fault point."""


def point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, _action = spec.partition(":kill")
    if target != name:
        return
    if spec.endswith(":kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFailure(f"injected failure at {name}")
