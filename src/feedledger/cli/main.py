"""The `feedledger` console entry point: the command tree (cli/app.py, whose groups
import each command's module when it is used) run as the whole process (cli/process.py).

Every query command has `--json`; errors are one line on stderr and a non-zero exit
(cli/app.py's root group is the one error boundary).
"""

from __future__ import annotations

from feedledger.cli import process  # first: it limits OpenBLAS's threads before numpy loads
from feedledger.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """The console entry point (`feedledger`, `python -m feedledger`)."""
    process.run(app)
