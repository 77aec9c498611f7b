"""The `feedledger` command tree: the root Typer, every sub-group, the root options
(`--config`, `--version`) and the CLI's one error boundary.

Command modules register their commands with module-level `@<group>.command("name")`
decorators on the objects defined here; `cli/main.py` imports them for that side effect.
Commands are listed in `--help` in the order their modules are imported (then the groups,
in the order added below).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from feedledger.cli.common import handle_error

if TYPE_CHECKING:
    from typer import _click  # typer's own click (its Context type)


class GuardedGroup(TyperGroup):
    """The root group: a FeedledgerError (or a full disk, a refused SQL statement...)
    raised by any command below it becomes one line on stderr and its exit code. It is in
    the click group, so it holds under `CliRunner` as well as under `main()`."""

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _usage_error(exc)
            handle_error(exc)
            raise

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except Exception as exc:  # a bad root option (`feedledger --bogus`)
            _usage_error(exc)
            raise


def _usage_error(exc: Exception) -> None:
    """A bad option, a missing argument... (a usage error of any command): one line on
    stderr naming it and where the usage is, exit 2 (instead of the usage box). A group
    called without a command still shows its help; `--help` is not an error."""
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    if not isinstance(exc, UsageError) or isinstance(exc, NoArgsIsHelpError):
        return
    message = " ".join(exc.format_message().split()).rstrip(".")
    path = exc.ctx.command_path if exc.ctx is not None else "feedledger"
    typer.echo(f"error: {message} (see '{path} --help')", err=True)
    raise typer.Exit(exc.exit_code)


app = typer.Typer(
    name="feedledger",
    cls=GuardedGroup,
    help=(
        "Keep an honest, replayable, bitemporal history of external data feeds.\n\n"
        "Start with `feedledger init`, declare a source with `feedledger source add`, "
        "then `feedledger ingest SOURCE FILE --published-at DATE`. valid time comes from "
        "the publisher's date, transaction time from the commit."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)

source_app = typer.Typer(
    help="Declare and list sources (stored in feedledger.toml).", no_args_is_help=True
)
db_app = typer.Typer(help="The store's schema (Alembic migrations).", no_args_is_help=True)
archive_app = typer.Typer(help="The content-addressed payload archive.", no_args_is_help=True)
subscriber_app = typer.Typer(help="Who hears about changes (webhooks, JSON-lines files).")
notify_app = typer.Typer(help="Deliver the outbox: at least once, signed, retried.")
gap_app = typer.Typer(help="Record stretches in which a source was not observed.")
destination_app = typer.Typer(
    help="Downstream projections of a source's current state.", no_args_is_help=True
)
manifest_app = typer.Typer(
    help="Frozen populations for destination rebuilds.", no_args_is_help=True
)

app.add_typer(source_app, name="source")
app.add_typer(db_app, name="db")
app.add_typer(archive_app, name="archive")
app.add_typer(subscriber_app, name="subscriber")
app.add_typer(notify_app, name="notify")
app.add_typer(gap_app, name="gap")
app.add_typer(destination_app, name="destination")
app.add_typer(manifest_app, name="manifest")


def _print_version(value: bool) -> None:
    if value:
        from feedledger import __version__

        typer.echo(f"feedledger {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Path to feedledger.toml (default: ./feedledger.toml or $FEEDLEDGER_CONFIG).",
        envvar="FEEDLEDGER_CONFIG",
    ),
    version: bool = typer.Option(
        False,
        "--version",
        help="Print feedledger's version and exit.",
        is_eager=True,
        callback=_print_version,
    ),
) -> None:
    ctx.obj = {"config": str(config) if config else None}
