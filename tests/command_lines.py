"""A `feedledger ...` command line checked against the CLI's real command tree, without
running it: for tests/deploy (the systemd units' ExecStart) and tests/project (the
production guide's code blocks).

`check(argv)` walks the click tree that `feedledger` builds (typer's `get_command` of
the app, the lazy groups looking each command up as they do for `--help`), parsing
the root options, each group's name and the command's own options and arguments the
way click does when it runs one: an unknown command or option, a missing argument or
required option, a value of the wrong type (`--workers two`) or out of range raise
`BadCommandLine` naming it. Parameter callbacks are not run, so nothing is opened.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer.main
from typer._click.core import Context
from typer._click.exceptions import ClickException
from typer.core import TyperGroup as Group
from typer.exceptions import Exit

from feedledger.cli.app import app


class BadCommandLine(AssertionError):
    pass


@dataclass(frozen=True)
class Parsed:
    path: tuple[str, ...]  # ("scheduler",), ("source", "add")
    params: dict[str, Any]  # the command's parameters as parsed (defaults filled in)
    root: dict[str, Any]  # the root options (`--config`)


def check(argv: list[str]) -> Parsed:
    """`argv` (without the leading `feedledger`) parsed by the CLI's command tree."""
    command: Any = typer.main.get_command(app)
    ctx: Context | None = None
    name = "feedledger"
    path: list[str] = []
    args = list(argv)
    root: dict[str, Any] = {}
    try:
        while True:
            ctx = command.make_context(name, args, parent=ctx, resilient_parsing=False)
            root = root or dict(ctx.params)
            if not isinstance(command, Group):
                return Parsed(tuple(path), dict(ctx.params), root)
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:
                raise BadCommandLine(f"`feedledger {' '.join(argv)}`: no command after {name}")
            name, args = rest[0], rest[1:]
            sub = command.get_command(ctx, name)
            if sub is None:
                raise BadCommandLine(
                    f"`feedledger {' '.join(argv)}`: no command {name!r} in "
                    f"`{ctx.command_path}` (it has: {', '.join(command.list_commands(ctx))})"
                )
            command = sub
            path.append(name)
    except Exit as exc:  # --help or --version: eager, they would print and exit
        raise BadCommandLine(f"`feedledger {' '.join(argv)}`: exits early ({exc})") from None
    except ClickException as exc:
        raise BadCommandLine(f"`feedledger {' '.join(argv)}`: {exc.format_message()}") from None


def command_lines(text: str) -> Iterator[list[str]]:
    """The `feedledger` command lines of a shell script or code block: lines joined at
    a trailing backslash, comments cut, `&&`/`;`/`|` separating commands; each yielded
    without its leading `feedledger` (a path ending in it too), after any `VAR=value`
    assignments and a loop's `do`."""
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token and set(token) <= set(";&|"):
                yield from _feedledger(words)
                words = []
            else:
                words.append(token)


SHELL_WORDS = {"do", "then", "else", "exec", "time", "!"}


def _feedledger(words: list[str]) -> Iterator[list[str]]:
    # `do feedledger ...` (a loop's body), `PGPASSWORD=... feedledger ...`
    while words and (words[0] in SHELL_WORDS or ("=" in words[0] and words[0][0] != "-")):
        words = words[1:]
    if words and words[0].rsplit("/", 1)[-1] == "feedledger":
        yield words[1:]
