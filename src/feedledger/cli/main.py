"""The `feedledger` console entry point: imports the command modules (each registers
its commands on cli/app.py's groups) and runs the app.

Every query command has `--json`; errors are one line on stderr and a non-zero exit
(cli/app.py's root group is the one error boundary).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import NoReturn

# A CLI process does no linear algebra, yet numpy (imported by the data libraries)
# loads OpenBLAS, which starts a thread per core that spins at start-up: ~0.1 CPU s a
# command (numpy's import and 0.5 s idle: 0.15 CPU s, 0.045 with one thread), taken
# from the parse on a 2-core machine. Set before anything imports numpy; a value the
# user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from feedledger.cli import common
from feedledger.cli.app import app

# The command modules register their commands on cli/app.py's groups when imported;
# `--help` lists the commands in this order (then the groups, in app.py's order).
COMMAND_MODULES = (
    "ledger_cmds",
    "entity_cmds",
    "recovery_cmds",
    "gap_cmds",
    "scheduler_cmds",
    "sync_cmds",
    "demo_cmd",
    "workspace_cmds",
    "archive_cmds",
    "notify_cmds",
    "serve_cmd",
)


for _name in COMMAND_MODULES:
    importlib.import_module(f"feedledger.cli.{_name}")


def main() -> None:
    """The console entry point. A CLI process is short-lived, so the cyclic garbage
    collector is off (reference counting frees what it uses; the collector's passes over
    the libraries' objects cost a quarter of a second), and once the command has
    finished and its output is flushed the process ends at once rather than tearing
    the interpreter down piece by piece. Every write has committed (or rolled back)
    before the command returns; an SQLite store keeps its write-ahead log for the next
    writer to checkpoint (see `Store.close`)."""
    import gc

    gc.disable()
    common.LEAVE_WAL = True
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    _finish(code)


def _finish(code: int) -> NoReturn:
    from feedledger import timing

    timing.report()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
