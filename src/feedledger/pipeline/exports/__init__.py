"""Exports: a source as it stood, written to a file or a stream (`snapshot`).

Modules: `snapshot` (the entry: check the format, fetch the rows a batch at a time,
write them, put the file in place only when complete), `order` (the source's column
order, not the stored one), `writers` (CSV, JSON lines and Parquet over Arrow batches,
and `warm`: what a stream's first use costs, paid at `serve`'s start), `spliced` (the
compiled renderer's rows and the general writer's, put back in row order), `columns`
(typed columns for GeoParquet and GeoPackage) and `geo` (GeoJSON, GeoParquet,
GeoPackage).

May import: the ledger's read side (`ledger.snapshot_rows` and the stored form's
decoding), `formats`, `model`, `context`, `ahead` and `pipeline.intake.stages`. Never the
run side of the pipeline (ingest, apply, archiving, catchup, run), the fetchers
(`sources`), `notify` or `sync` (the `exports` contract of pyproject.toml); the API
and the CLI import it, not the other way round.
"""
