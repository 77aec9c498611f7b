"""`FeedledgerTranslator`: how feedledger's sources and destinations are named in Dagster
(asset keys, groups, partitions, descriptions, metadata), in the style of dagster-dlt's
`DagsterDltTranslator`: subclass it and override a method to change one thing.

Per source `name` (defaults):

| asset | key |
|---|---|
| the publisher (observable source asset) | `feedledger/<name>/publisher` |
| the source's ledger (a live run or catch-up) | `feedledger/<name>` |
| its publications (partitioned by publication date) | `feedledger/<name>/publications` |

and per destination `feedledger/destinations/<name>`; the dynamic partitions are named
`feedledger_<name>_publications`, the sensor `feedledger_<name>_publications_sensor`.
"""

from __future__ import annotations

import re
from typing import Any

import dagster as dg

import feedledger as fl


def _safe(name: str) -> str:
    """A feedledger name as Dagster's names allow (letters, digits, underscores)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


class FeedledgerTranslator:
    """Names, groups and metadata of the assets `feedledger_assets` builds."""

    prefix: tuple[str, ...] = ("feedledger",)

    def get_asset_key(self, source: fl.SourceConfig) -> dg.AssetKey:
        """The source's ledger: what a live run or a catch-up materialises."""
        return dg.AssetKey([*self.prefix, source.name])

    def get_publisher_key(self, source: fl.SourceConfig) -> dg.AssetKey:
        """The publisher's newest publication (observed, never materialised)."""
        return dg.AssetKey([*self.prefix, source.name, "publisher"])

    def get_publications_key(self, source: fl.SourceConfig) -> dg.AssetKey:
        """The source's publications, one partition per publication date."""
        return dg.AssetKey([*self.prefix, source.name, "publications"])

    def get_destination_key(self, destination: str) -> dg.AssetKey:
        return dg.AssetKey([*self.prefix, "destinations", destination])

    def get_group_name(self, source: fl.SourceConfig) -> str:
        return "feedledger"

    def get_partitions_name(self, source: fl.SourceConfig) -> str:
        return f"feedledger_{_safe(source.name)}_publications"

    def get_sensor_name(self, source: fl.SourceConfig) -> str:
        return f"{self.get_partitions_name(source)}_sensor"

    def get_description(self, source: fl.SourceConfig) -> str:
        return (
            f"feedledger source {source.name}: its bitemporal history, each publication "
            f"applied in publisher order (cadence {source.cadence}, timezone "
            f"{source.timezone})."
        )

    def get_metadata(self, source: fl.SourceConfig) -> dict[str, Any]:
        """Static metadata of the source's assets: its declaration's essentials."""
        data: dict[str, Any] = {
            "feedledger/source": source.name,
            "feedledger/key": ", ".join(source.key),
            "feedledger/format": str(source.format),
            "feedledger/kind": source.kind.value,
            "feedledger/cadence": source.cadence,
            "feedledger/timezone": source.timezone,
        }
        if source.fetch is not None:
            data["feedledger/fetch"] = source.fetch
        if source.connector is not None:
            data["feedledger/connector"] = str(source.connector)
        return data

    def get_tags(self, source: fl.SourceConfig) -> dict[str, str]:
        return {}

    def get_kinds(self, source: fl.SourceConfig) -> set[str]:
        return {"feedledger"}
