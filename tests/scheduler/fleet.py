"""A fleet of county feeds for the scheduler's fleet tests (test_fleet.py) and
bench/fleet_bench.py: `sources` daily sources of `parcels` parcels each, in mixed formats
-- of every ten, six CSV folders, two GeoJSON folders, one GeoPackage layer folder and
one ArcGIS FeatureServer layer (the project's fake, feedledger/demo/featureserver.py,
whose answers follow Esri's ArcGIS REST API reference: see its docstring) -- on one
workspace (any store, any archive: the tests and the bench give PostgreSQL and an S3
bucket on moto's server).

A publication is a function of (source, date) only: parcel k's `value` is the day's in
one parcel of every hundred (so ~2 % change a day: the day's hundredth changes, the
previous day's changes back) and one parcel of every five hundred is absent (deleted,
back the next day). A folder source "publishes" a day by a file `NAME_YYYY-MM-DD.EXT`
appearing in its folder (the scheduler finds the newest, or the missed ones, by the date
in the name); an ArcGIS source by its layer's content and edit date (00:00 UTC that day)
changing -- it serves only its current state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from feedledger import config
from feedledger.config import Workspace
from feedledger.demo.featureserver import FIELDS, FakeArcGIS, serving

KINDS = ("csv",) * 6 + ("geojson",) * 2 + ("gpkg", "arcgis")
EXT = {"csv": "csv", "geojson": "geojson", "gpkg": "gpkg"}


def kind_of(i: int) -> str:
    return KINDS[i % len(KINDS)]


def midnight_us(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 1_000_000


def day_rows(parcels: int, day: date) -> list[tuple[int, str, str]]:
    """(k, zoning, value) of the parcels present on `day`."""
    d = day.toordinal()
    return [
        (k, ("R-1", "R-2", "C-1", "M-1", "AG")[k % 5], f"v{d}" if k % 100 == d % 100 else "v0")
        for k in range(parcels)
        if k % 500 != d % 500
    ]


def square(k: int) -> tuple[float, float, float, float]:
    """Parcel k's box in longitude/latitude (a grid of 0.001-degree cells)."""
    x, y = -105.0 + (k % 200) * 0.001, 40.0 + (k // 200) * 0.001
    return x, y, x + 0.0009, y + 0.0009


def csv_bytes(parcels: int, day: date) -> bytes:
    lines = ["parcel_id,zoning,value"]
    lines += [f"P{k:07d},{z},{v}" for k, z, v in day_rows(parcels, day)]
    return ("\n".join(lines) + "\n").encode()


def geojson_bytes(parcels: int, day: date) -> bytes:
    feats = []
    for k, z, v in day_rows(parcels, day):
        x0, y0, x1, y1 = square(k)
        ring = [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]
        feats.append(
            {
                "type": "Feature",
                "properties": {"parcel_id": f"P{k:07d}", "zoning": z, "value": v},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        )
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


def write_gpkg(path: Path, parcels: int, day: date) -> None:
    import pyarrow as pa
    import pyogrio
    import shapely

    rows = day_rows(parcels, day)
    boxes = [square(k) for k, _z, _v in rows]
    shapes = shapely.box(*zip(*boxes, strict=True)) if boxes else []
    table = pa.table(
        {
            "parcel_id": [f"P{k:07d}" for k, _z, _v in rows],
            "zoning": [z for _k, z, _v in rows],
            "value": [v for _k, _z, v in rows],
            "geometry": pa.array(shapely.to_wkb(shapes), pa.binary()),
        }
    )
    tmp = path.with_name(path.name + ".part")  # appears whole: a partial name is skipped
    pyogrio.write_arrow(
        table, tmp, driver="GPKG", layer="parcels", geometry_name="geometry",
        geometry_type="Polygon", crs="EPSG:4326",
    )  # fmt: skip
    tmp.rename(path)


def arcgis_features(parcels: int, day: date) -> list[dict[str, Any]]:
    out = []
    for k, z, v in day_rows(parcels, day):
        x, y = 6_000_000.0 + (k % 200) * 100.0, 2_000_000.0 + (k // 200) * 100.0
        ring = [[x, y], [x, y + 90.0], [x + 90.0, y + 90.0], [x + 90.0, y], [x, y]]
        zoning = z if v == "v0" else f"Z{day.toordinal() % 10_000_000}"
        attributes = {"OBJECTID": k + 1, "PARCEL_ID": f"P{k:07d}", "ZONING": zoning}
        out.append({"attributes": attributes, "rings": [ring]})
    return out


@dataclass
class Fleet:
    """The fleet's sources on workspace `ws`, their folders under `feed`, their ArcGIS
    layers served while `serving()` lasts."""

    ws: Workspace
    feed: Path
    sources: int
    parcels: int
    layers: dict[str, FakeArcGIS] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [f"county{i:03d}" for i in range(self.sources)]

    def kind(self, name: str) -> str:
        return kind_of(int(name.removeprefix("county")))

    def folder_sources(self) -> list[str]:
        return [n for n in self.names if self.kind(n) != "arcgis"]

    @contextmanager
    def serving(self) -> Iterator[Fleet]:
        """Serve every ArcGIS layer on 127.0.0.1, declare the sources (once), yield."""
        with ExitStack() as stack:
            for n in self.names:
                if self.kind(n) == "arcgis":
                    fake = FakeArcGIS(features=[], fields=list(FIELDS), max_record_count=2000)
                    self.layers[n] = stack.enter_context(serving(fake))
            self.declare()
            yield self
        self.layers.clear()

    def declare(self) -> None:
        """The sources in feedledger.toml (rewritten once; the layers' ports may differ
        from a previous declaration)."""
        current = Workspace.load(self.ws.config_path)
        for n in self.names:
            kind = self.kind(n)
            options: dict[str, Any] = {"key": ("parcel_id",), "retry_s": 1.0}
            if kind == "arcgis":
                options.update(key=("PARCEL_ID",), connector="arcgis", fetch=self.layers[n].url)
                # ~0.1 m, a county layer's precision: a grid as coarse as the 0.0009-degree
                # parcels would snap each one to an invalid shape (a slow path, not a fleet)
                options["geometry_grid"] = 1e-6
            else:
                folder = self.feed / n
                folder.mkdir(parents=True, exist_ok=True)
                options.update(fetch=str(folder), format=kind)
                if kind == "gpkg":
                    options["layer"] = "parcels"
            current.add_source(config.make_source(n, **options), replace=True)
        self.ws = Workspace.load(self.ws.config_path)

    def publish(self, day: date, names: list[str] | None = None) -> None:
        """`day`'s publication of these sources (default all) appears at the publisher."""
        for n in names if names is not None else self.names:
            kind = self.kind(n)
            if kind == "arcgis":
                layer = self.layers[n]
                layer.features = arcgis_features(self.parcels, day)
                layer.edit_date = midnight_us(day) // 1000
                continue
            path = self.feed / n / f"{n}_{day.isoformat()}.{EXT[kind]}"
            if kind == "gpkg":
                write_gpkg(path, self.parcels, day)
                continue
            data = (
                csv_bytes(self.parcels, day) if kind == "csv" else geojson_bytes(self.parcels, day)
            )
            tmp = path.with_name(path.name + ".part")
            tmp.write_bytes(data)
            tmp.rename(path)

    def first_commands(self, day: date, names: list[str] | None = None) -> list[list[str]]:
        """`feedledger ingest` argument lists applying `day`'s files (published first) as
        each folder source's first payload."""
        return [
            ["ingest", n, str(self.feed / n / f"{n}_{day.isoformat()}.{EXT[self.kind(n)]}")]
            for n in (names if names is not None else self.names)
            if self.kind(n) != "arcgis"
        ]

    def first_layer_runs(self, day: date, names: list[str] | None = None) -> None:
        """Each ArcGIS source's first live run, of `day`'s layer (published first), as
        the scheduler would have run it that day at 01:00 UTC: the run observes the
        layer then, not now (a look today would have observed today's publication as
        not there: invariant 12)."""
        from feedledger.context import Context  # lazy: the tests' collection stays light
        from feedledger.pipeline.intake.run import live_run

        ctx = Context(Workspace.load(self.ws.config_path))
        try:
            for n in names if names is not None else self.names:
                if self.kind(n) == "arcgis":
                    live_run(ctx, n, now=midnight_us(day) + 3_600_000_000)
        finally:
            ctx.close()
