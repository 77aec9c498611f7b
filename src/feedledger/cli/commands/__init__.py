"""The commands themselves, a module per family (`ledger_cmds`: ingest, run, runs,
changes, snapshot...; `entity_cmds`: history, asof; `recovery_cmds`; `gap_cmds`;
`archive_cmds`; `export_cmds`; `sync_cmds` with `sync_render`; `notify_cmds`;
`scheduler_cmds`; `workspace_cmds`; `doctor_cmd`; `search_cmd`; `serve_cmd`;
`demo_cmd`): plain functions whose typer signature and docstring make the command,
each calling the public API (`feedledger.api`) and rendering its result. `cli/app.py`
names them by "module:function" and imports a module only when its command is looked
up, so nothing is imported here."""
