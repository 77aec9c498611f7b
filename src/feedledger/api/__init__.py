"""The public library layer: typed values in, typed results out (see docs/api.md).

Above `pipeline` and the features (notify, sync), below the faces (CLI, server,
scheduler); it imports those layers, `context`, `config` and `model`, never a face.
`feedledger/__init__.py` re-exports the public names.

One door: `ledger.Ledger` opens a workspace's sources and holds what spans them (the
declarations, run ids, health, destinations and manifests, notifications, the archive's
upkeep, the write audit); `source.Source` holds what one source does (ingest, run,
backfill, replay, queries, snapshots, freezes, its archive, runs and calendar). The
other modules hold one thing each: the result types (`results`), and the typed
builders the two classes delegate to (`archive`, `audit`, `calendar`, `runs_page`,
`destination`, `destination_status`, `notify`, `review`, `snapshot_stream`,
`history_frame`, `windows`, `workspace`); `_`-modules are private helpers. Nothing
below `ledger` imports it: `Source`, `Destination` and `Notifications` take the
workspace `Context`, so the modules form no circle."""
