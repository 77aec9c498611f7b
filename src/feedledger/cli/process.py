"""The lifetime of a `feedledger` process: how it starts, what it skips and how it ends.

A `feedledger` command is a short-lived process that runs one command and ends, so it
does five things a long-lived program would not. They are all here, and only the
console entry point (`cli/main.py`, through `run`) turns them on; the tests' in-process
CliRunner and the library keep the defaults:

* OpenBLAS runs one thread. A CLI process does no linear algebra, yet numpy (imported
  by the data libraries) loads OpenBLAS, which starts a thread per core that spins at
  start-up: ~0.1 CPU s a command on a 2-core machine. Set when this module is imported,
  before anything imports numpy; a value the user set wins.
* pydantic looks for no plugins. Every pydantic model or adapter built (the
  configuration's, and typer's one per command parameter) first asked
  `importlib.metadata` for the installed `pydantic` entry points, a scan of every
  installed distribution's metadata (~0.02 CPU s a command); feedledger's models have
  no use for a plugin. Set when this module is imported; a value the user set wins
  (an empty PYDANTIC_DISABLE_PLUGINS loads them all again).
* The cyclic garbage collector is off. Reference counting frees what a command uses;
  the collector's passes over the libraries' objects cost a quarter of a second.
* An SQLite store leaves its write-ahead log for the next writer to checkpoint
  (`LEAVE_WAL`, read by `cli/common.ledger`; see `Store.close`): every write has
  committed (or rolled back) before the command returns, so nothing is at risk.
* Once the command has finished and its output is flushed, the process ends at once
  (`os._exit`) rather than tearing the interpreter down piece by piece; the exit code is
  the command's.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable
from typing import NoReturn

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# True in a `feedledger` process (set by `run`): the store leaves SQLite's WAL on close.
LEAVE_WAL = False


def run(command: Callable[[], object]) -> NoReturn:
    """Run the command tree as the whole process: collector off, the WAL left, then
    flush and end with the command's exit code."""
    global LEAVE_WAL
    gc.disable()
    LEAVE_WAL = True
    try:
        command()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    _finish(code)


def _finish(code: int) -> NoReturn:
    from feedledger import timing  # lazy: only at exit (`--help` loads cli and model only)

    timing.report()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
