"""The Delta table itself (delta-rs, `deltalake`): where it is, how to reach it, what
position it holds, and the one commit an export makes.

* Where: a local folder, or `s3://bucket/prefix` on the archive's object store: its
  endpoint (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else `[archive] endpoint_url`),
  credentials from the standard AWS environment only (never feedledger.toml), plain
  HTTP allowed for an http:// endpoint (MinIO, moto), and commits made safe by S3's
  conditional put (`aws_conditional_put = etag`: no DynamoDB lock needed).
* Position: each commit carries, per source, an app transaction (Delta's `txn`
  action) `feedledger/<source>` whose version is the transaction instant (µs) the
  table now reflects for that source. Read back with `transaction_version`, it is how
  an export killed after its commit knows the commit happened: nothing is written twice.
* The commit: ONE Delta commit per export call -- a plain append when no exported row
  changed (a first export, a source new to the table), else a merge: rows not in the
  table inserted, rows already there (matched on source, valid year and version id)
  given their new `valid_to` and `retracted_at` -- written by feedledger itself for a
  local table without a new column (`lake/rewrite.py`: copy-on-write of only the files
  holding an updated row), by delta-rs's MERGE otherwise.

The only module of feedledger that imports `deltalake` (import-linter contract
`delta-optional`), and only when called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from feedledger.lake import rewrite
from feedledger.model.errors import ConfigError, FeedledgerError

__all__ = ["APP_PREFIX", "DeltaTarget", "storage_options"]

APP_PREFIX = "feedledger/"
PARTITIONS = ["source", "valid_year"]
_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class ExportError(FeedledgerError):
    """The Delta table refused or failed a read or a commit."""


def _deltalake() -> Any:
    """The deltalake module, or a one-line ConfigError naming the extra."""
    try:
        import deltalake  # lazy: the extra
    except ImportError as exc:
        raise ConfigError(
            "export delta needs the deltalake package, which is not installed",
            hint="pip install 'feedledger[delta]'",
        ) from exc
    return deltalake


def storage_options(uri: str, endpoint: str | None) -> dict[str, str] | None:
    """delta-rs's options for `uri`: None for a local path; for s3:// the endpoint (the
    archive's, resolved as the archive resolves it), region and credentials from the
    environment, plain HTTP for an http:// endpoint, conditional put for safe commits."""
    if not uri.startswith("s3://"):
        return None
    from feedledger.archive.s3client import resolve_endpoint  # lazy: S3 targets only

    options: dict[str, str] = {"aws_conditional_put": "etag"}
    url = resolve_endpoint(endpoint)
    if url:
        options["AWS_ENDPOINT_URL"] = url
        if url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    options["AWS_REGION"] = (
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    )
    for name in _CREDENTIALS:
        if os.environ.get(name):
            options[name] = os.environ[name]
    return options


def _line(exc: BaseException) -> str:
    """An error's text on one line (delta-rs's messages span several)."""
    return " ".join(str(exc).replace("↳", " ").split())


def normalised(uri: str) -> str:
    """A target as the store names it: an S3 URI without a trailing slash, a local path
    absolute."""
    if "://" in uri:
        if not uri.startswith("s3://"):
            raise ConfigError(
                f"Delta table {uri!r}: only a local folder or s3://bucket/prefix is supported",
                hint="e.g. --to ./lake/parcels or --to s3://my-bucket/lake/parcels",
            )
        return uri.rstrip("/")
    return os.path.abspath(uri)


# rows per Parquet row group of the files delta-rs writes (its default: 1M), as
# `lake/rewrite.py` writes its own (GROUP_ROWS)
ROW_GROUP_ROWS = 131_072


def _writer(lib: Any) -> Any:
    return lib.WriterProperties(max_row_group_size=ROW_GROUP_ROWS)


class DeltaTarget:
    """One Delta table, opened lazily (it may not exist yet)."""

    def __init__(self, uri: str, options: Mapping[str, str] | None) -> None:
        self.uri = uri
        self.options = dict(options) if options is not None else None
        self._table: Any = None

    def table(self) -> Any:
        """The DeltaTable at its newest version, or None if there is none yet."""
        DeltaTable = _deltalake().DeltaTable

        if self._table is None:
            try:
                if not DeltaTable.is_deltatable(self.uri, storage_options=self.options):
                    return None
                self._table = DeltaTable(self.uri, storage_options=self.options)
            except (OSError, _deltalake().exceptions.DeltaError) as exc:
                raise ExportError(f"Delta table {self.uri}: {_line(exc)}") from exc
        else:
            self._table.update_incremental()
        return self._table

    def version(self) -> int | None:
        found = self.table()
        return None if found is None else int(found.version())

    def position(self, source: str) -> int | None:
        """The transaction instant the table reflects for `source` (None: never exported)."""
        found = self.table()
        if found is None:
            return None
        value = found.transaction_version(APP_PREFIX + source)
        return None if value is None else int(value)

    def schema(self) -> pa.Schema | None:
        found = self.table()
        if found is None:
            return None
        return pa.schema(found.schema().to_arrow())

    def commit(
        self,
        rows: pa.Table | pa.RecordBatchReader,
        positions: Mapping[str, int],
        *,
        updates: bool,
        metadata: Mapping[str, str],
    ) -> int:
        """Write `rows` in ONE commit carrying `positions` (source -> known_at) as app
        transactions and `metadata` as the commit's own; returns the new version.
        `updates`: some rows may already be in the table (a merge; `rows` a Table), else
        an append (`rows` may be a stream: written as it comes, still one commit)."""
        lib = _deltalake()
        CommitProperties, Transaction = lib.CommitProperties, lib.Transaction
        write_deltalake = lib.write_deltalake
        props = CommitProperties(
            custom_metadata=dict(metadata),
            app_transactions=[Transaction(APP_PREFIX + s, int(k)) for s, k in positions.items()],
        )
        existing = self.table()
        try:
            if existing is None:
                write_deltalake(
                    self.uri,
                    rows,
                    partition_by=PARTITIONS,
                    mode="error",
                    name="feedledger history",
                    description="feedledger: the bitemporal history of its sources' versions",
                    storage_options=self.options,
                    commit_properties=props,
                    writer_properties=_writer(lib),
                )
            elif not updates:
                write_deltalake(
                    existing,
                    rows,
                    mode="append",
                    schema_mode="merge",
                    commit_properties=props,
                    writer_properties=_writer(lib),
                )
            elif isinstance(rows, pa.RecordBatchReader):
                raise ValueError("a stream of rows can only be appended")
            elif rewrite.applies(self.uri, pa.schema(existing.schema().to_arrow()), rows.schema):
                rewrite.rewrite(lib, existing, self.uri, rows, props)
            else:
                (
                    existing.merge(
                        rows,
                        predicate=(
                            "t.source = s.source AND t.valid_year = s.valid_year "
                            "AND t.version_id = s.version_id"
                        ),
                        source_alias="s",
                        target_alias="t",
                        merge_schema=True,
                        commit_properties=props,
                    )
                    .when_matched_update(
                        updates={"valid_to": "s.valid_to", "retracted_at": "s.retracted_at"}
                    )
                    .when_not_matched_insert_all()
                    .execute()
                )
        except (OSError, ValueError, RuntimeError, lib.exceptions.DeltaError) as exc:
            raise ExportError(f"Delta table {self.uri}: the commit failed: {_line(exc)}") from exc
        self._table = None
        version = self.version()
        assert version is not None
        return version
