"""The `feedledger` command tree: the root Typer, every sub-group, the commands each
group lists, the root options (`--config`, `--version`) and the CLI's one error boundary.

Each group names its commands explicitly, `name -> "module:function"`, in the order
`--help` lists them (a group's sub-groups follow its commands); a command's module is
imported only when the command is looked up (click's "lazily loading subcommands"
pattern, `LazyGroup` below), so `feedledger ingest` never imports the sync or server
commands. The command functions are plain functions: their signature (typer options)
and docstring make the command.
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import typer
import typer.main
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup
from typer.models import CommandInfo

from feedledger import __version__
from feedledger.cli.common import handle_error

if TYPE_CHECKING:
    from typer import _click  # typer's own click (its Context type)


class LazyGroup(TyperGroup):
    """A group whose commands are imported on first use. `lazy_commands` maps a command
    name to "module:function"; `get_command` imports the module and builds the click
    command from the function the way `@group.command(name)` would have. `--help` of
    the group looks every command up (for its short help), a command's run only its own.
    Eagerly added commands (the sub-groups) follow the lazy ones in `list_commands`."""

    lazy_commands: ClassVar[dict[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, _click.Command] = {}

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*self.lazy_commands, *super().list_commands(ctx)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in self.lazy_commands:
            return super().get_command(ctx, cmd_name)
        if cmd_name not in self._loaded:
            module, function = self.lazy_commands[cmd_name].split(":")
            callback = getattr(importlib.import_module(module), function)
            self._loaded[cmd_name] = typer.main.get_command_from_info(
                CommandInfo(name=cmd_name, callback=callback),
                pretty_exceptions_short=True,  # typer.Typer's default
                rich_markup_mode=self.rich_markup_mode,
            )
        return self._loaded[cmd_name]

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        """TyperGroup's, with "Did you mean ...?" looking among the lazy names too
        (typer's looks among `self.commands` only, the loaded ones)."""
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as exc:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if self.suggest_commands and matches:
                suggestions = ", ".join(f"{m!r}" for m in matches)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {suggestions}?"
            raise


def lazy(commands: dict[str, str]) -> type[LazyGroup]:
    """A LazyGroup class listing `commands` (name -> "module:function")."""
    return type("LazyGroup", (LazyGroup,), {"lazy_commands": commands})


class GuardedGroup(LazyGroup):
    """The root group: a FeedledgerError (or a full disk, a refused SQL statement...)
    raised by any command below it becomes one line on stderr and its exit code. It is in
    the click group, so it holds under `CliRunner` as well as under `main()`."""

    lazy_commands: ClassVar[dict[str, str]] = {
        "ingest": "feedledger.cli.commands.ledger_cmds:ingest_cmd",
        "run": "feedledger.cli.commands.ledger_cmds:run_cmd",
        "runs": "feedledger.cli.commands.ledger_cmds:runs_cmd",
        "changes": "feedledger.cli.commands.ledger_cmds:changes_cmd",
        "watermark": "feedledger.cli.commands.ledger_cmds:watermark_cmd",
        "snapshot": "feedledger.cli.commands.ledger_cmds:snapshot_cmd",
        "verify": "feedledger.cli.commands.ledger_cmds:verify_cmd",
        "history": "feedledger.cli.commands.entity_cmds:history_cmd",
        "asof": "feedledger.cli.commands.entity_cmds:asof_cmd",
        "assess": "feedledger.cli.commands.recovery_cmds:assess_cmd",
        "backfill": "feedledger.cli.commands.recovery_cmds:backfill_cmd",
        "replay": "feedledger.cli.commands.recovery_cmds:replay_cmd",
        "retract": "feedledger.cli.commands.recovery_cmds:retract_cmd",
        "review": "feedledger.cli.commands.recovery_cmds:review_cmd",
        "gaps": "feedledger.cli.commands.gap_cmds:gaps_cmd",
        "freeze": "feedledger.cli.commands.gap_cmds:freeze_cmd",
        "thaw": "feedledger.cli.commands.gap_cmds:thaw_cmd",
        "scheduler": "feedledger.cli.commands.scheduler_cmds:scheduler",
        "health": "feedledger.cli.commands.scheduler_cmds:health",
        "doctor": "feedledger.cli.commands.doctor_cmd:doctor",
        "sync": "feedledger.cli.commands.sync_cmds:sync",
        "sync-explain": "feedledger.cli.commands.sync_cmds:sync_explain",
        "reconcile": "feedledger.cli.commands.sync_cmds:reconcile",
        "search": "feedledger.cli.commands.search_cmd:search_cmd",
        "demo": "feedledger.cli.commands.demo_cmd:demo",
        "init": "feedledger.cli.commands.workspace_cmds:init",
        "serve": "feedledger.cli.commands.serve_cmd:serve_cmd",
    }

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
    cls=lazy(
        {
            "add": "feedledger.cli.commands.workspace_cmds:source_add",
            "list": "feedledger.cli.commands.workspace_cmds:source_list",
            "remove": "feedledger.cli.commands.workspace_cmds:source_remove",
        }
    ),
    help="Declare and list sources (stored in feedledger.toml).",
    no_args_is_help=True,
)
db_app = typer.Typer(
    cls=lazy(
        {
            "upgrade": "feedledger.cli.commands.workspace_cmds:db_upgrade",
            "current": "feedledger.cli.commands.workspace_cmds:db_current",
        }
    ),
    help="The store's schema (Alembic migrations).",
    no_args_is_help=True,
)
archive_app = typer.Typer(
    cls=lazy(
        {
            "add": "feedledger.cli.commands.archive_cmds:add",
            "list": "feedledger.cli.commands.archive_cmds:list_",
            "reindex": "feedledger.cli.commands.archive_cmds:reindex_cmd",
            "compact": "feedledger.cli.commands.archive_cmds:compact_cmd",
            "verify": "feedledger.cli.commands.archive_cmds:verify_cmd",
        }
    ),
    help="The content-addressed payload archive.",
    no_args_is_help=True,
)
subscriber_app = typer.Typer(
    cls=lazy(
        {
            "add": "feedledger.cli.commands.notify_cmds:subscriber_add",
            "list": "feedledger.cli.commands.notify_cmds:subscriber_list",
            "remove": "feedledger.cli.commands.notify_cmds:subscriber_remove",
        }
    ),
    help="Who hears about changes (webhooks, JSON-lines files).",
)
notify_app = typer.Typer(
    cls=lazy(
        {
            "dispatch": "feedledger.cli.commands.notify_cmds:notify_dispatch",
            "status": "feedledger.cli.commands.notify_cmds:notify_status",
            "retry": "feedledger.cli.commands.notify_cmds:notify_retry",
            "correction": "feedledger.cli.commands.notify_cmds:notify_correction",
        }
    ),
    help="Deliver the outbox: at least once, signed, retried.",
)
gap_app = typer.Typer(
    cls=lazy({"add": "feedledger.cli.commands.gap_cmds:gap_add_cmd"}),
    help="Record stretches in which a source was not observed.",
)
destination_app = typer.Typer(
    cls=lazy(
        {
            "add": "feedledger.cli.commands.sync_cmds:destination_add",
            "list": "feedledger.cli.commands.sync_cmds:destination_list",
            "remove": "feedledger.cli.commands.sync_cmds:destination_remove",
        }
    ),
    help="Downstream projections of a source's current state.",
    no_args_is_help=True,
)
manifest_app = typer.Typer(
    cls=lazy(
        {
            "create": "feedledger.cli.commands.sync_cmds:manifest_create",
            "show": "feedledger.cli.commands.sync_cmds:manifest_show",
            "list": "feedledger.cli.commands.sync_cmds:manifest_list",
        }
    ),
    help="Frozen populations for destination rebuilds.",
    no_args_is_help=True,
)
export_app = typer.Typer(
    cls=lazy(
        {
            "delta": "feedledger.cli.commands.export_cmds:delta_cmd",
            "status": "feedledger.cli.commands.export_cmds:status_cmd",
        }
    ),
    help="The history as a Delta Lake table (pip install 'feedledger[delta]').",
    no_args_is_help=True,
)

app.add_typer(source_app, name="source")
app.add_typer(db_app, name="db")
app.add_typer(archive_app, name="archive")
app.add_typer(subscriber_app, name="subscriber")
app.add_typer(notify_app, name="notify")
app.add_typer(gap_app, name="gap")
app.add_typer(destination_app, name="destination")
app.add_typer(manifest_app, name="manifest")
app.add_typer(export_app, name="export")


def _print_version(value: bool) -> None:
    if value:
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
