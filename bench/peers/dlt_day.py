"""One day of the dlt peer: load a day's snapshot CSV with ``merge`` + ``scd2`` into DuckDB.

    bench/.peers/bin/python bench/peers/dlt_day.py --workspace WS FILE

Runs under the PEERS virtual environment (``bench/.peers``, see ``make bench-peers``), as
one whole process per day, the way a dlt user's daily job runs:

1. read the CSV into an Arrow table (``pyarrow.csv``, every column text, so values are
   compared exactly as published: no type inference);
2. add a 64-bit row hash (DuckDB ``hash()`` over every column, in-process on the Arrow
   table) as the ``row_hash`` column: dlt's scd2 on the Arrow path needs a row version
   column (``row_version_column_name``), it does not compute one itself;
3. ``pipeline.run`` of a resource with ``write_disposition={"disposition": "merge",
   "strategy": "scd2", "row_version_column_name": "row_hash"}`` into the DuckDB file
   ``WS/dlt.duckdb`` (dataset ``ledger``, table ``parcels``). Every load is a complete
   snapshot: rows absent from it are retired (``_dlt_valid_to`` set), changed rows get a
   new version, ``_dlt_valid_from`` is the load's time.

``--boundary-timestamp`` (optional) passes dlt's ``boundary_timestamp`` (the validity
stamp to use instead of the load time); the benchmark does not use it.

Telemetry is off (``RUNTIME__DLTHUB_TELEMETRY=false``), dlt's data dir is inside WS.
Prints one JSON object: rows, in-process timings.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

KEY = "parcel_id"
ROW_HASH = "row_hash"
DATASET = "ledger"
TABLE = "parcels"
PIPELINE = "parcels_scd2"


def _offline_env(ws: Path) -> None:
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ["DLT_DATA_DIR"] = str(ws / ".dlt-data")
    os.environ["DLT_PROJECT_DIR"] = str(ws)
    # no progress bars or log noise on stdout: the harness parses our JSON
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="one daily dlt scd2 load")
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--boundary-timestamp", default=None)
    p.add_argument("file", type=Path)
    a = p.parse_args(argv)
    ws = a.workspace.resolve()
    ws.mkdir(parents=True, exist_ok=True)
    _offline_env(ws)

    import dlt
    import duckdb
    import pyarrow.csv as pacsv

    t_imported = time.perf_counter()
    with a.file.open(newline="", encoding="utf-8") as f:
        names = next(csv.reader(f))
    # every column as text, empty fields as "" (never null): the published values as is
    table = pacsv.read_csv(
        a.file,
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, "string"), strings_can_be_null=False
        ),
    )
    t_read = time.perf_counter()
    con = duckdb.connect()
    con.register("day", table)
    cols = ", ".join(f'"{c}"' for c in names)
    # DuckDB's hash is a UBIGINT: shifted into BIGINT's range (all 64 bits kept)
    row_hash = f"(hash({cols})::HUGEINT - 9223372036854775808)::BIGINT"
    table = con.sql(f"SELECT *, {row_hash} AS {ROW_HASH} FROM day").to_arrow_table()
    con.close()
    t_hashed = time.perf_counter()

    disposition: dict[str, object] = {
        "disposition": "merge",
        "strategy": "scd2",
        "row_version_column_name": ROW_HASH,
    }
    if a.boundary_timestamp:
        disposition["boundary_timestamp"] = a.boundary_timestamp
    resource = dlt.resource(table, name=TABLE, write_disposition=disposition)
    pipeline = dlt.pipeline(
        pipeline_name=PIPELINE,
        destination=dlt.destinations.duckdb(str(ws / "dlt.duckdb")),
        dataset_name=DATASET,
        pipelines_dir=str(ws / ".dlt-data" / "pipelines"),
        progress=None,
    )
    info = pipeline.run(resource)
    t_loaded = time.perf_counter()
    info.raise_on_failed_jobs()
    print(
        json.dumps(
            {
                "tool": "dlt",
                "file": str(a.file),
                "rows": table.num_rows,
                "imports_s": round(t_imported - T_START, 4),
                "read_s": round(t_read - t_imported, 4),
                "hash_s": round(t_hashed - t_read, 4),
                "pipeline_s": round(t_loaded - t_hashed, 4),
                "in_process_s": round(t_loaded - T_START, 4),
                "loads": len(info.loads_ids),
            }
        )
    )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
