"""`FeedledgerResource`: the workspace a Dagster deployment runs feedledger on.

Either a workspace folder (or the path of its feedledger.toml), as the CLI's `--config`
names it, or a store URL and an archive (a folder or `s3://bucket/prefix`) with the
sources declared by a feedledger.toml named in `sources_from` (its own store and archive
are not used). Each use opens the ledger and closes it after (`ledger()`): the store's
connections never outlive the step, so a run's steps in other processes each open
their own, and a lease held by one step is the one-run-per-source rule across them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from pydantic import Field

import feedledger as fl


class FeedledgerResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """A feedledger workspace, opened through the public API (`feedledger.open`)."""

    workspace: str | None = Field(
        default=None,
        description="The workspace folder, or the path of its feedledger.toml.",
    )
    store: str | None = Field(
        default=None,
        description="A store URL (sqlite:///... or postgresql://...), with `archive`, "
        "instead of a workspace.",
    )
    archive: str | None = Field(
        default=None, description="The archive with `store`: a folder or s3://bucket/prefix."
    )
    archive_endpoint_url: str | None = Field(
        default=None, description="The S3 endpoint of an s3:// archive (MinIO, moto...)."
    )
    sources_from: str | None = Field(
        default=None,
        description="With `store` and `archive`: the feedledger.toml whose sources are "
        "declared (its store and archive are not used).",
    )
    dashboard_url: str | None = Field(
        default=None,
        description="The base URL of `feedledger serve` (e.g. http://127.0.0.1:8000): "
        "materialisations link to its run pages.",
    )
    backfill_fetch: bool = Field(
        default=True,
        description="A partition backfill first archives what the publisher still serves "
        "for its window (the CLI's backfill); False: the archive only.",
    )

    @contextmanager
    def ledger(self) -> Iterator[fl.Ledger]:
        """The workspace, open for the duration of the `with` block."""
        led = self._open()
        try:
            yield led
        finally:
            led.close()

    def _open(self) -> fl.Ledger:
        if self.workspace is not None:
            if self.store is not None or self.archive is not None:
                raise fl.ConfigError(
                    "FeedledgerResource: give a workspace, or store and archive, not both"
                )
            return fl.open(self.workspace)
        if self.store is None or self.archive is None:
            raise fl.ConfigError(
                "FeedledgerResource needs a workspace, or both a store URL and an archive",
                hint="FeedledgerResource(workspace='path/to/workspace')",
            )
        led = fl.open(
            store=self.store, archive=self.archive, archive_endpoint_url=self.archive_endpoint_url
        )
        if self.sources_from is not None:
            with fl.open(self.sources_from) as declared:
                for cfg in declared.sources(by_name=False):
                    fields = cfg.model_dump(exclude={"name"}, exclude_defaults=True)
                    led.add_source(cfg.name, replace=True, **fields)
        return led

    def declarations(self, names: list[str] | None = None) -> list[fl.SourceConfig]:
        """The declared sources (those of `names`, in that order; SourceNotFound for a
        name not declared)."""
        with self.ledger() as led:
            if names is None:
                return led.sources()
            return [led.source(n).config for n in names]

    def run_page(self, run_id: str | None) -> str | None:
        """The dashboard's page of a run (None without a `dashboard_url` or a run)."""
        if self.dashboard_url is None or run_id is None:
            return None
        return f"{self.dashboard_url.rstrip('/')}/runs/{run_id}"
