"""The `feedledger` command (Typer + Rich): a face over the public API. Each command
parses its options, calls `feedledger.api`, and renders the result (Rich tables, or
stable JSON with `--json`); errors become one line on stderr and an exit code.

Holds: `app` (the command tree: each group lists its commands by name and imports a
command's module only when it is used), `main` (the console entry point), `process`
(the process's lifetime: collector off, WAL left, fast exit), `common` (options,
output, the error rendering), `exit_codes`, and `commands/`: one `*_cmds` module per
family of commands.

May import: `feedledger.api`, `feedledger.model`, the top-level names (`feedledger`,
`feedledger.timing`), `feedledger.scheduler` (the `scheduler` command starts its loop)
and `feedledger.server` (`serve` starts it); never the layers under the API (ledger,
pipeline, archive, sources, notify, sync, context, config) nor SQL (pyproject's
[tool.importlinter] contracts). At module level only what `--help` needs: typer, Rich
and light `model` modules (tests/cli/test_startup.py)."""
