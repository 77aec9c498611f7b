"""`snapshot`: the whole source as it stood at a valid time, written as CSV, JSON lines,
Parquet or, for a GIS source, GeoJSON, GeoParquet or GeoPackage (`geo`).

CSV, Parquet and the GIS formats put their columns in the SOURCE's field order
(`order`); JSON lines keep each entity's stored attributes text as it is
(canonical JSON, fields in code-point order). Rows are streamed from the store as
Arrow batches (`ledger.snapshot_rows.batches`), never held whole; CSV, JSON lines and
Parquet are written a batch at a time, column-wise (`writers`). The output
file is written beside its final name and moved into place only when complete, so a
refused or failed export leaves nothing behind. The binary formats
(Parquet, GeoParquet, GeoPackage) need a file: they are refused on stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pyarrow as pa

from feedledger.context import Context
from feedledger.ledger.readers import snapshot_rows
from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports import writers
from feedledger.pipeline.exports.order import field_order, layout_at, ordered

__all__ = [
    "EXPORTS",
    "GEO_EXPORTS",
    "batches",
    "check_format",
    "check_output",
    "column_order",
    "export",
    "ordered_columns",
    "rows",
]

GEO_EXPORTS = ("geojson", "geoparquet", "gpkg")  # pipeline/exports/geo.py (imported lazily)
EXPORTS = ("csv", "jsonl", "parquet", *GEO_EXPORTS)
_FILE_ONLY = ("parquet", "geoparquet", "gpkg")
# rows fetched and split at a time by a CSV/JSON lines/Parquet export: each batch costs
# a few dozen columnar calls whatever its size, so a process writing a file takes
# bigger ones than a server's stream (api/snapshot_stream.py: 4k, for its memory)
EXPORT_BATCH_ROWS = 32768

Row = tuple[str, str, str | None]


def check_format(fmt: str, output: Path | None, *, geo: bool | None = None) -> None:
    """Refuse, before anything is read, a format `snapshot` cannot write: unknown, a
    GIS format of a source that is not GIS (`geo` False; None: not known yet), a
    binary format to stdout."""
    if fmt not in EXPORTS:
        raise ConfigError(f"--format must be one of {', '.join(EXPORTS)}, not {fmt!r}")
    if fmt in _FILE_ONLY and output is None:
        raise ConfigError(
            f"--format {fmt} writes a file, not stdout",
            hint=f"give one with -o, e.g. -o snapshot.{'parquet' if 'parquet' in fmt else fmt}",
        )
    if geo is False and fmt in GEO_EXPORTS:
        raise ConfigError(
            f"--format {fmt} is for GIS sources (geojson, shapefile, gpkg, ... payloads); "
            "this source has no geometry",
            hint="use --format csv, jsonl or parquet",
        )


def check_output(output: Path) -> None:
    """Refuse, before anything is read or written, an output path that cannot be a file."""
    if output.is_dir():
        raise ConfigError(
            f"cannot write the snapshot to {output}: it is a directory",
            hint="give a file name, e.g. -o " + str(output / "snapshot.csv"),
        )
    if not output.parent.is_dir():
        raise ConfigError(
            f"cannot write the snapshot to {output}: folder {output.parent} does not exist"
        )


def rows(
    ctx: Context, source: str, valid_us: int, known_us: int | None, *, geometry: bool = True
) -> Generator[Row, None, None]:
    """(key, attributes JSON, geometry GeoJSON text or None) of every entity present;
    the geometry is read for a GIS source unless `geometry` is False."""
    src = ctx.workspace.source(source)
    return snapshot_rows.rows(
        ctx.store, src.name, valid_us, known_us, geometry=geometry and src.is_geo
    )


def batches(
    ctx: Context,
    source: str,
    valid_us: int,
    known_us: int | None,
    *,
    geometry: bool = True,
    batch: int = snapshot_rows.BATCH_ROWS,
    stored: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches (`key`, `attributes`, and for a GIS source `geometry` unless
    `geometry` is False) of every entity present (`ledger.readers.snapshot_rows.batches`), of
    about `batch` rows fetched at a time; `stored`: the attributes in their stored
    form, for the writers (`writers`)."""
    src = ctx.workspace.source(source)
    geo = geometry and src.is_geo
    return snapshot_rows.batches(
        ctx.store, src.name, valid_us, known_us, geometry=geo, batch=batch, stored=stored
    )


def column_order(ctx: Context, source: str, valid_us: int, known_us: int | None) -> list[str]:
    """The source's field order at `valid_us` (see `order`); [] if unknown."""
    src = ctx.workspace.source(source)
    return field_order(ctx, layout_at(ctx, src.name, valid_us, known_us), src.format)


def ordered_columns(columns: list[str], order: list[str]) -> list[str]:
    """A frame's columns in the source's order, a `geometry` column last."""
    fields = [c for c in columns if c != "geometry"]
    return ordered(fields, order) + (["geometry"] if "geometry" in columns else [])


def export(
    ctx: Context, source: str, output: Path | None, fmt: str, valid_us: int, known_us: int | None
) -> int:
    """Write the source as it stood at `valid_us` (as known at `known_us`) to `output`
    (stdout if None) in `fmt`; the number of entities written."""
    src = ctx.workspace.source(source)
    check_format(fmt, output, geo=src.is_geo)
    if output is not None:
        check_output(output)
    layout = layout_at(ctx, src.name, valid_us, known_us)
    order = field_order(ctx, layout, src.format) if fmt != "jsonl" else []
    crs = layout.crs if layout is not None else None
    if fmt in ("csv", "jsonl", "parquet"):
        return _columnar(ctx, src.name, output, fmt, order, valid_us, known_us)
    found = rows(ctx, src.name, valid_us, known_us, geometry=True)
    try:
        if fmt in ("geoparquet", "gpkg"):
            assert output is not None
            return _typed(found, fmt, output, order, crs, src.name)
        from feedledger.pipeline.exports.geo import write_geojson  # lazy: GIS (shapely)

        return _text(output, lambda h: write_geojson(found, h, order, crs))
    finally:
        found.close()  # its store connection given back


def _columnar(
    ctx: Context,
    source: str,
    output: Path | None,
    fmt: str,
    order: list[str],
    valid_us: int,
    known_us: int | None,
) -> int:
    geo = fmt == "parquet"
    loading = writers.loading(fmt)
    try:
        found = batches(
            ctx, source, valid_us, known_us, geometry=geo, batch=EXPORT_BATCH_ROWS, stored=True
        )
        if fmt == "parquet":
            assert output is not None
            key = ctx.workspace.source(source).key
            try:
                with _into_place(output) as part:
                    return writers.write_parquet(found, part, order, key)
            except OSError as exc:
                msg = f"cannot write the snapshot to {output}: {exc.strerror or exc}"
                raise ConfigError(msg) from None
        if fmt == "csv":
            return _binary(output, lambda h: writers.write_csv(found, h, order))
        return _binary(output, lambda h: writers.write_jsonl(found, h))
    finally:
        if loading is not None:
            loading.wait()


def _typed(
    found: Iterable[Row], fmt: str, output: Path, order: list[str], crs: str | None, layer: str
) -> int:
    from feedledger.pipeline.exports import geo as geo_export  # lazy: GIS (shapely)

    spool_path = _beside(output, "spool")
    try:
        spooled = geo_export.spool(found, spool_path)
        with _into_place(output) as part:
            if fmt == "gpkg":
                return geo_export.write_gpkg(spooled, part, order, crs, layer)
            return geo_export.write_geoparquet(spooled, part, order, crs)
    except OSError as exc:
        raise ConfigError(f"cannot write the snapshot to {output}: {exc.strerror or exc}") from None
    finally:
        spool_path.unlink(missing_ok=True)


def _text(output: Path | None, write: Callable[[IO[str]], int]) -> int:
    if output is None:
        return write(sys.stdout)
    try:
        with _into_place(output) as part, part.open("w", encoding="utf-8", newline="") as handle:
            return write(handle)
    except OSError as exc:
        raise ConfigError(f"cannot write the snapshot to {output}: {exc.strerror or exc}") from None


def _binary(output: Path | None, write: Callable[[IO[bytes]], int]) -> int:
    if output is None:
        sys.stdout.flush()
        n = write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return n
    try:
        with _into_place(output) as part, part.open("wb") as handle:
            return write(handle)
    except OSError as exc:
        raise ConfigError(f"cannot write the snapshot to {output}: {exc.strerror or exc}") from None


def _beside(output: Path, what: str) -> Path:
    # the output's suffix is kept last: GDAL picks some behaviour by extension
    return output.with_name(f".{output.stem}.{what}-{os.getpid()}{output.suffix}")


@contextmanager
def _into_place(output: Path) -> Iterator[Path]:
    """A part file beside `output`, moved onto it if the block completes, else removed."""
    part = _beside(output, "part")
    try:
        yield part
        os.replace(part, output)
    finally:
        part.unlink(missing_ok=True)
