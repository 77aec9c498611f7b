"""Shared CLI plumbing: the ledger (public API) from the global options, times typed on
the command line, JSON and Rich output, and the error boundary's rendering of a
FeedledgerError as one clear line on stderr with a distinct exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from feedledger.cli import process
from feedledger.cli.exit_codes import exit_code
from feedledger.model.envfail import env_failure, failing_path
from feedledger.model.errors import FeedledgerError
from feedledger.model.jsonout import RawJSON, dumps
from feedledger.model.timeutil import from_us, parse_instant, to_us

if TYPE_CHECKING:
    from feedledger.api.ledger import Ledger
    from feedledger.api.workspace import Workspace

out = Console(highlight=False, soft_wrap=True, emoji=False)
if not out.is_terminal and "COLUMNS" not in os.environ:
    out.width = 160  # piped output: do not squeeze tables into 80 columns
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

JSON_OPT = typer.Option(False, "--json", help="Print stable JSON on stdout (see README).")


def config_path(ctx: typer.Context) -> Path | None:
    obj = ctx.find_root().obj or {}
    value = obj.get("config")
    return Path(value) if value else None


def workspace(ctx: typer.Context) -> Workspace:
    """The workspace's configuration (the scheduler face runs on it)."""
    from feedledger.api.workspace import load_workspace  # lazy: --help loads no API

    return load_workspace(config_path(ctx))


@contextmanager
def ledger(ctx: typer.Context) -> Iterator[Ledger]:
    """The workspace named by the global options, opened through the public API."""
    from feedledger.api.ledger import open_config  # lazy: --help loads no API

    with open_config(config_path(ctx), leave_wal=process.LEAVE_WAL) as led:
        yield led


def instant(text: str, tz: str, what: str) -> datetime:
    """A time typed on the command line (YYYY-MM-DD: 00:00 in `tz`; or ISO-8601)."""
    return parse_instant(text, tz, what=what)


def opt_instant(text: str | None, tz: str, what: str) -> datetime | None:
    return None if text is None else instant(text, tz, what)


def warn_invalid_geometries(source: str, count: int | None) -> None:
    """A GIS payload's invalid geometries are kept as stated, never refused: say so."""
    if count:
        err.print(
            f"[yellow]warning:[/] {escape(source)}: {count:,} feature"
            f"{'s have' if count > 1 else ' has'} invalid geometry (kept as stated)",
            markup=True,
        )


def emit_json(value: Any) -> None:
    sys.stdout.write(dumps(value) + "\n")
    sys.stdout.flush()


def show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, RawJSON):
        return value.text
    return str(value)


def table(title: str, columns: list[str], rows: list[list[Any]], *, fold: bool = False) -> None:
    """A Rich table on stdout. `fold`: a cell too wide for its column is wrapped onto
    further lines, never cut (for JSON and other text that must be read whole)."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold" if fold else "ellipsis")
    for r in rows:
        t.add_row(*[show(v) for v in r])
    out.print(t)


def when(value: int | datetime | None) -> str:
    """Compact UTC time for tables (JSON output keeps full ISO-8601)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        value = to_us(value)
    text = from_us(value).strftime("%Y-%m-%d %H:%M:%S")
    return text.removesuffix(" 00:00:00") + "Z" if text.endswith(" 00:00:00") else text + "Z"


def fail(error: FeedledgerError) -> None:
    err.print(f"[bold red]error:[/] {escape(str(error))}", markup=True, highlight=False)
    raise typer.Exit(exit_code(error))


def _fail_on_environment(exc: Exception) -> None:
    """A full disk, a read-only file system, no permission... that no layer below turned
    into a FeedledgerError: still one line naming the path and the fix, not a traceback
    or a misleading schema hint (FEEDLEDGER_DEBUG=1 keeps the traceback)."""
    failure = env_failure(exc)
    if failure is None or os.environ.get("FEEDLEDGER_DEBUG"):
        return
    path = failing_path(exc, "the workspace's files")
    fail(
        FeedledgerError(
            f"cannot write {path}: {failure.cause} ({failure.detail})",
            hint=f"{failure.fix(path)}; set FEEDLEDGER_DEBUG=1 for the traceback",
        )
    )


def handle_error(exc: Exception) -> None:
    """The CLI's error boundary (cli/app.py's root group): a FeedledgerError (the
    library's; a refused SQL statement is one too, mapped where the store is) or an
    environment failure -> one line on stderr and the error's exit code
    (cli/exit_codes.py; raises typer.Exit). Returns for anything else, which the caller
    re-raises (typer's own exits and usage errors pass through untouched), and, with
    FEEDLEDGER_DEBUG=1, for an error whose hint offers the traceback."""
    if isinstance(exc, typer.Exit | typer.Abort | typer.TyperException):
        return
    if isinstance(exc, FeedledgerError):
        if os.environ.get("FEEDLEDGER_DEBUG") and "FEEDLEDGER_DEBUG=1" in (exc.hint or ""):
            return
        fail(exc)
    _fail_on_environment(exc)
