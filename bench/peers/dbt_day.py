"""One day of the dbt peer: load a day's CSV into DuckDB, then ``dbt snapshot``.

    bench/.peers/bin/python bench/peers/dbt_day.py --workspace WS --init
    bench/.peers/bin/python bench/peers/dbt_day.py --workspace WS FILE

Runs under the PEERS virtual environment (``bench/.peers``, see ``make bench-peers``).

``--init`` writes a minimal dbt project and its ``profiles.yml`` into ``WS/dbt`` (a
temporary workspace the harness creates; nothing in ``~/.dbt``): a DuckDB profile on
``WS/dbt.duckdb``, the source ``raw.parcels`` and one YAML snapshot::

    snapshots:
      - name: parcels_snapshot
        relation: source('raw', 'parcels')
        config: {unique_key: parcel_id, strategy: check, check_cols: all,
                 hard_deletes: new_record}

A day is one whole process, the way a dbt user's daily job runs: the CSV is loaded
into ``raw.parcels`` (``CREATE OR REPLACE TABLE ... AS SELECT * FROM read_csv(...,
all_varchar = true)``: every column as text, as published), the DuckDB connection is
closed, then ``dbt snapshot`` runs in the same process through ``dbtRunner`` (what the
``dbt`` command calls; its start-up, project parsing -- partial parsing from the previous
day's ``target/`` -- and the snapshot SQL all count). Rows absent from the day are
hard-deleted records (``hard_deletes: new_record`` adds a row with ``dbt_is_deleted``);
``dbt_valid_from`` is the snapshot's run time.

Anonymous usage stats are off (``flags: send_anonymous_usage_stats: false`` in
``dbt_project.yml``, ``DBT_SEND_ANONYMOUS_USAGE_STATS=false``, ``DO_NOT_TRACK=1``).
Prints one JSON object: rows, in-process timings.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

PROJECT = "feedledger_bench"
SNAPSHOT = "parcels_snapshot"

DBT_PROJECT_YML = f"""\
name: {PROJECT}
version: "1.0"
config-version: 2
profile: {PROJECT}
model-paths: ["models"]
snapshot-paths: ["snapshots"]
target-path: "target"
flags:
  send_anonymous_usage_stats: false
  partial_parse: true
  use_colors: false
"""

PROFILES_YML = f"""\
{PROJECT}:
  target: bench
  outputs:
    bench:
      type: duckdb
      path: "{{path}}"
      schema: main
      threads: 1
"""

SOURCES_YML = """\
version: 2
sources:
  - name: raw
    schema: raw
    tables:
      - name: parcels
"""

SNAPSHOT_YML = f"""\
snapshots:
  - name: {SNAPSHOT}
    relation: source('raw', 'parcels')
    config:
      unique_key: parcel_id
      strategy: check
      check_cols: all
      hard_deletes: new_record
"""


def _offline_env() -> None:
    os.environ["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    os.environ["DO_NOT_TRACK"] = "1"


def project_dir(ws: Path) -> Path:
    return ws / "dbt"


def init(ws: Path) -> None:
    proj = project_dir(ws)
    (proj / "models").mkdir(parents=True, exist_ok=True)
    (proj / "snapshots").mkdir(parents=True, exist_ok=True)
    (proj / "dbt_project.yml").write_text(DBT_PROJECT_YML)
    db = (ws / "dbt.duckdb").resolve()
    (proj / "profiles.yml").write_text(PROFILES_YML.replace("{path}", str(db)))
    (proj / "models" / "sources.yml").write_text(SOURCES_YML)
    (proj / "snapshots" / "parcels.yml").write_text(SNAPSHOT_YML)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="one daily dbt snapshot")
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--init", action="store_true", help="write the dbt project and profile")
    p.add_argument("file", type=Path, nargs="?")
    a = p.parse_args(argv)
    ws = a.workspace.resolve()
    _offline_env()
    if a.init:
        ws.mkdir(parents=True, exist_ok=True)
        init(ws)
        print(json.dumps({"tool": "dbt", "init": str(project_dir(ws))}))
        return 0
    if a.file is None:
        p.error("FILE is required (or --init)")
    proj = project_dir(ws)

    import duckdb

    con = duckdb.connect(str(ws / "dbt.duckdb"))
    con.execute("CREATE SCHEMA IF NOT EXISTS raw")
    path = str(a.file.resolve()).replace("'", "''")
    con.execute(
        "CREATE OR REPLACE TABLE raw.parcels AS "
        f"SELECT * FROM read_csv('{path}', header = true, all_varchar = true)"
    )
    row = con.execute("SELECT count(*) FROM raw.parcels").fetchone()
    rows = int(row[0]) if row else 0
    con.close()
    t_loaded = time.perf_counter()

    from dbt.cli.main import dbtRunner

    t_imported = time.perf_counter()
    args = ["snapshot", "--project-dir", str(proj), "--profiles-dir", str(proj), "--quiet"]
    res = dbtRunner().invoke(args)
    t_done = time.perf_counter()
    if not res.success:
        print(f"dbt_day: dbt snapshot failed: {res.exception}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "tool": "dbt",
                "file": str(a.file),
                "rows": rows,
                "load_csv_s": round(t_loaded - T_START, 4),
                "dbt_import_s": round(t_imported - t_loaded, 4),
                "dbt_snapshot_s": round(t_done - t_imported, 4),
                "in_process_s": round(t_done - T_START, 4),
            }
        )
    )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
