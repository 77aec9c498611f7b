"""The public library layer: typed values in, typed results out (see docs/api.md).

Above `pipeline` and the features (notify, sync), below the faces (CLI, server,
scheduler); it imports those layers, `context`, `config` and `model`, never a face.
`feedledger/__init__.py` re-exports the public names.

One door: `ledger.Ledger` opens a workspace's sources and holds what spans them (the
declarations, run ids, health, destinations and manifests, notifications, the archive's
upkeep, the write audit); `source.Source` holds what one source does (ingest, run,
backfill, replay, queries, snapshots, freezes, its archive, runs and calendar). The
other modules hold one thing each: the result types (`results`), and the typed
builders the two classes delegate to (`archive`, `calendar`, `destination`,
`destination_status`, `notify`, `snapshot_stream`, `windows`); `runs/` holds runs by id
(the Ledger's methods on them, the pages, review, the write audit), `workspace/` the
workspace created, its schema, and `doctor`; `_source/` is private to `Source`.
`runs_page` and `audit` hold only deprecated aliases (gone next release). Nothing
below `ledger` imports it: `Source`, `Destination` and `Notifications` take the
workspace `Context`, so the modules form no circle."""
