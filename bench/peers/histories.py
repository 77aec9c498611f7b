"""Read back the histories the three tools wrote, normalise them and compare them.

    bench/.peers/bin/python bench/peers/histories.py compare --series DIR --days 1,2,3 \\
        [--feedledger LEDGER.db] [--dlt DLT.duckdb] [--dbt DBT.duckdb] [--expect-days 1,2,3,7]
    bench/.peers/bin/python bench/peers/histories.py show KEY --series DIR --days ... [...]
    bench/.peers/bin/python bench/peers/histories.py pick --series DIR --days 1,...,7 \\
        --window 4,5,6

Runs under the PEERS virtual environment (it needs DuckDB; feedledger's SQLite store is
read with the standard library's ``sqlite3``). Prints one JSON object.

Every history is normalised to the same shape -- per entity, its versions in valid-time
order, each either a state (the 11 attribute values other than the key, empty and null
alike read as "") or a delete marker -- and the validity columns are kept aside:

* feedledger: ``versions`` of source ``parcels`` not retracted, ordered by
  (``valid_from``, ``version_id``); a tombstone (``deleted``) is a delete marker;
* dlt ``scd2``: ``ledger.parcels`` ordered by ``_dlt_valid_from``; dlt writes no row for a
  delete, it closes the last version (``_dlt_valid_to`` set, no newer version): that is
  read as a delete marker valid from that ``_dlt_valid_to``;
* dbt snapshot: ``main.parcels_snapshot`` ordered by ``dbt_valid_from``; with
  ``hard_deletes: new_record`` a delete is its own row (``dbt_is_deleted = 'True'``);
* truth: computed from the day files themselves (``manifest.json`` of the series):
  a version whenever a key appears, its attributes differ from the previous day's, or it
  disappears (delete marker), dated with the file's publisher date. ``--days`` says which
  days were observed (the outage case observes 1,2,3,7 only).

``compare`` reports, per tool, its raw row count and the number of entities, versions and
delete markers after normalisation, and against every other source: how many entities
agree on (number of versions, sequence of states), with a few examples of the rest.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

# feedledger's codebook decoder, loaded from its file: the peers' environment has no
# feedledger (importing the package would import all of it); the module needs polars
# only, which the Makefile installs there too
_ENCODING = Path(__file__).resolve().parents[2] / "src" / "feedledger" / "ledger" / "encoding"
_CODEC = _ENCODING / "codec.py"
_spec = importlib.util.spec_from_file_location("feedledger_attr_codec", _CODEC)
assert _spec is not None and _spec.loader is not None
attr_codec = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = attr_codec  # dataclasses look their module up by name
_spec.loader.exec_module(attr_codec)
from_text = attr_codec.from_text

KEY = "parcel_id"
ATTRS = [
    "owner",
    "address",
    "city",
    "zip",
    "zoning",
    "land_use",
    "acres",
    "assessed_value",
    "year_built",
    "last_sale_date",
    "flood_zone",
]
SEP = "\x1f"  # between attribute values of one state
VSEP = "\x1e"  # between versions of one entity
DELETED = "<deleted>"
SOURCE = "parcels"


def _attrs_expr(prefix: str = "") -> str:
    parts = ", ".join(f"coalesce({prefix}\"{a}\", '')" for a in ATTRS)
    return f"concat_ws('{SEP}', {parts})"


# --- loaders: each creates a view ``h_<tool>(key, ord, valid_from, deleted, attrs)`` ------


def load_feedledger(con: duckdb.DuckDBPyConnection, db: Path) -> int:
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    # stored attribute texts are compact (issue 17): decoded with their codebooks
    books = {i: from_text(t) for i, t in src.execute("SELECT fields_id, codebook FROM field_lists")}
    cur = src.execute(
        "SELECT key, valid_from, recorded_at, version_id, deleted, attributes, fields_id "
        "FROM versions WHERE source = ? AND retracted_at IS NULL",
        (SOURCE,),
    )
    batches = []
    names = ["key_json", "valid_from_us", "recorded_at_us", "version_id", "deleted", "attributes"]
    while rows := cur.fetchmany(200_000):
        cols = list(zip(*rows, strict=True))
        batches.append(
            pa.record_batch(
                [
                    pa.array(cols[0], pa.string()),
                    pa.array(cols[1], pa.int64()),
                    pa.array(cols[2], pa.int64()),
                    pa.array(cols[3], pa.int64()),
                    pa.array([bool(x) for x in cols[4]], pa.bool_()),
                    pa.array(
                        [
                            a if f is None or a is None else books[f].decode(a)
                            for a, f in zip(cols[5], cols[6], strict=True)
                        ],
                        pa.string(),
                    ),
                ],
                names=names,
            )
        )
    src.close()
    schema = pa.schema(
        [
            ("key_json", pa.string()),
            ("valid_from_us", pa.int64()),
            ("recorded_at_us", pa.int64()),
            ("version_id", pa.int64()),
            ("deleted", pa.bool_()),
            ("attributes", pa.string()),
        ]
    )
    raw = pa.Table.from_batches(batches, schema=schema)
    con.register("fl_raw", raw)
    extracted = ", ".join(f"json_extract_string(attributes, '$.{a}') AS \"{a}\"" for a in ATTRS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE h_feedledger AS
        WITH x AS (
            SELECT json_extract_string(key_json, '$[0]') AS key,
                   make_timestamp(valid_from_us) AS valid_from,
                   make_timestamp(recorded_at_us) AS recorded_at, version_id, deleted,
                   {extracted}
            FROM fl_raw
        )
        SELECT key,
               row_number() OVER (PARTITION BY key ORDER BY valid_from, version_id) AS ord,
               valid_from, deleted,
               CASE WHEN deleted THEN NULL ELSE {_attrs_expr()} END AS attrs, recorded_at
        FROM x
        """
    )
    con.unregister("fl_raw")
    return raw.num_rows


def load_dlt(con: duckdb.DuckDBPyConnection, db: Path) -> int:
    con.execute(f"ATTACH '{db}' AS dltdb (READ_ONLY)")
    raw_rows = _count(con, "SELECT count(*) FROM dltdb.ledger.parcels")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE h_dlt AS
        WITH v AS (
            SELECT "{KEY}" AS key, _dlt_valid_from::TIMESTAMP AS valid_from,
                   _dlt_valid_to::TIMESTAMP AS valid_to, FALSE AS deleted,
                   {_attrs_expr()} AS attrs
            FROM dltdb.ledger.parcels
        ),
        last AS (  -- the newest version of each key (arg_max would skip a null valid_to)
            SELECT key, valid_to FROM v
            QUALIFY row_number() OVER (PARTITION BY key ORDER BY valid_from DESC) = 1
        ),
        d AS (  -- a retired last version: the entity was deleted at its valid_to
            SELECT key, valid_to AS valid_from, NULL AS valid_to, TRUE AS deleted,
                   NULL AS attrs
            FROM last WHERE valid_to IS NOT NULL
        ),
        u AS (SELECT * FROM v UNION ALL SELECT * FROM d)
        SELECT key, row_number() OVER (PARTITION BY key ORDER BY valid_from, deleted) AS ord,
               valid_from, deleted, attrs, NULL::TIMESTAMP AS recorded_at
        FROM u
        """
    )
    con.execute("DETACH dltdb")
    return raw_rows


def load_dbt(con: duckdb.DuckDBPyConnection, db: Path) -> int:
    con.execute(f"ATTACH '{db}' AS dbtdb (READ_ONLY)")
    raw_rows = _count(con, "SELECT count(*) FROM dbtdb.main.parcels_snapshot")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE h_dbt AS
        WITH v AS (
            SELECT "{KEY}" AS key, dbt_valid_from::TIMESTAMP AS valid_from,
                   coalesce(dbt_is_deleted, 'False') = 'True' AS deleted,
                   {_attrs_expr()} AS attrs
            FROM dbtdb.main.parcels_snapshot
        )
        SELECT key, row_number() OVER (PARTITION BY key ORDER BY valid_from, deleted) AS ord,
               valid_from, deleted, CASE WHEN deleted THEN NULL ELSE attrs END AS attrs,
               NULL::TIMESTAMP AS recorded_at
        FROM v
        """
    )
    con.execute("DETACH dbtdb")
    return raw_rows


def load_truth(
    con: duckdb.DuckDBPyConnection, series: Path, days: list[int], name: str = "truth"
) -> int:
    manifest = json.loads((series / "manifest.json").read_text())
    if manifest.get("columns", [KEY, *ATTRS]) != [KEY, *ATTRS]:
        # KEY/ATTRS repeat gen_parcels.COLUMNS (this runs in the peers' venv, without
        # polars, so it cannot import the generator): refuse a series that differs
        raise SystemExit(f"histories: series {series} has columns {manifest['columns']}")
    by_day = {d["day"]: d for d in manifest["days"]}
    missing = [d for d in days if d not in by_day]
    if missing:
        raise SystemExit(f"histories: series {series} has no day(s) {missing}")
    selects = []
    for i, d in enumerate(days):
        entry = by_day[d]
        path = str((series / entry["file"]).resolve()).replace("'", "''")
        selects.append(
            f"SELECT {i} AS obs, TIMESTAMP '{entry['published_at']}' AS published_at, "
            f'"{KEY}" AS key, {_attrs_expr()} AS attrs '
            f"FROM read_csv('{path}', header = true, all_varchar = true)"
        )
    con.execute("CREATE OR REPLACE TEMP TABLE t_obs AS " + " UNION ALL ".join(selects))
    days_values = ", ".join(
        f"({i}, TIMESTAMP '{by_day[d]['published_at']}')" for i, d in enumerate(days)
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE h_{name} AS
        WITH days(obs, published_at) AS (VALUES {days_values}),
        grid AS (
            SELECT k.key, d.obs, d.published_at
            FROM (SELECT DISTINCT key FROM t_obs) k CROSS JOIN days d
        ),
        g AS (
            SELECT grid.key, grid.obs, grid.published_at, o.attrs, o.key IS NOT NULL AS present
            FROM grid LEFT JOIN t_obs o ON o.key = grid.key AND o.obs = grid.obs
        ),
        w AS (
            SELECT *, lag(present) OVER k AS prev_present, lag(attrs) OVER k AS prev_attrs
            FROM g WINDOW k AS (PARTITION BY key ORDER BY obs)
        ),
        v AS (
            SELECT key, obs, published_at AS valid_from, NOT present AS deleted,
                   CASE WHEN present THEN attrs END AS attrs
            FROM w
            WHERE (present AND (NOT coalesce(prev_present, FALSE)
                                OR attrs IS DISTINCT FROM prev_attrs))
               OR (NOT present AND coalesce(prev_present, FALSE))
        )
        SELECT key, row_number() OVER (PARTITION BY key ORDER BY obs) AS ord,
               valid_from, deleted, attrs, NULL::TIMESTAMP AS recorded_at
        FROM v
        """
    )
    con.execute("DROP TABLE t_obs")
    return _count(con, f"SELECT count(*) FROM h_{name}")


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    rows = con.execute(sql).fetchall()
    return int(rows[0][0]) if rows else 0


# --- comparison ---------------------------------------------------------------------------


def _seq_view(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE s_{name} AS
        SELECT key, count(*) AS n,
               string_agg(CASE WHEN deleted THEN '{DELETED}' ELSE attrs END, '{VSEP}'
                          ORDER BY ord) AS seq
        FROM h_{name} GROUP BY key
        """
    )


def summary(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, int]:
    row = con.execute(
        f"SELECT count(DISTINCT key), count(*), count(*) FILTER (WHERE deleted) FROM h_{name}"
    ).fetchall()[0]
    return {"entities": int(row[0]), "versions": int(row[1]), "delete_markers": int(row[2])}


def compare_pair(con: duckdb.DuckDBPyConnection, a: str, b: str, examples: int = 5) -> dict:
    row = con.execute(
        f"""
        SELECT count(*) AS entities,
               count(*) FILTER (WHERE a.key IS NOT NULL AND b.key IS NOT NULL
                                AND a.n = b.n AND a.seq = b.seq) AS agree,
               count(*) FILTER (WHERE a.key IS NULL) AS only_{b},
               count(*) FILTER (WHERE b.key IS NULL) AS only_{a},
               count(*) FILTER (WHERE a.n <> b.n) AS version_count_differs,
               count(*) FILTER (WHERE a.n = b.n AND a.seq <> b.seq) AS values_differ
        FROM s_{a} a FULL OUTER JOIN s_{b} b ON a.key = b.key
        """
    ).fetchall()[0]
    cols = ["entities", "agree", f"only_{b}", f"only_{a}", "version_count_differs"]
    out: dict[str, Any] = dict(zip([*cols, "values_differ"], map(int, row), strict=True))
    out["mismatches"] = out["entities"] - out["agree"]
    bad = con.execute(
        f"""
        SELECT coalesce(a.key, b.key) AS key, a.n, b.n
        FROM s_{a} a FULL OUTER JOIN s_{b} b ON a.key = b.key
        WHERE a.key IS NULL OR b.key IS NULL OR a.n <> b.n OR a.seq <> b.seq
        ORDER BY 1 LIMIT {examples}
        """
    ).fetchall()
    out["examples"] = [{"key": k, f"{a}_versions": na, f"{b}_versions": nb} for k, na, nb in bad]
    return out


def open_all(args: argparse.Namespace) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any]]:
    con = duckdb.connect()
    info: dict[str, Any] = {"tools": {}}
    days = _ints(args.days)
    info["truth_days"] = days
    load_truth(con, args.series, days, "truth")
    info["tools"]["truth"] = {"raw_rows": None}
    if args.expect_days:
        info["expected_days"] = _ints(args.expect_days)
        load_truth(con, args.series, info["expected_days"], "expected")
        info["tools"]["expected"] = {"raw_rows": None}
    if args.feedledger:
        info["tools"]["feedledger"] = {"raw_rows": load_feedledger(con, args.feedledger)}
    if args.dlt:
        info["tools"]["dlt"] = {"raw_rows": load_dlt(con, args.dlt)}
    if args.dbt:
        info["tools"]["dbt"] = {"raw_rows": load_dbt(con, args.dbt)}
    return con, info


def cmd_compare(args: argparse.Namespace) -> dict[str, Any]:
    con, info = open_all(args)
    names = list(info["tools"])
    for name in names:
        _seq_view(con, name)
        info["tools"][name].update(summary(con, name))
    pairs: dict[str, Any] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs[f"{a}~{b}"] = compare_pair(con, a, b)
    info["pairs"] = pairs
    # how each tool dated its versions: versions per valid_from (to the second)
    info["stamps"] = {
        name: [
            [ts.isoformat(sep=" ", timespec="seconds"), int(count)]
            for ts, count in con.execute(
                f"SELECT date_trunc('second', valid_from) AS ts, count(*) FROM h_{name} "
                "GROUP BY ts ORDER BY ts LIMIT 50"
            ).fetchall()
        ]
        for name in names
    }
    if "feedledger" in names:
        # feedledger's valid_from is the publisher date: it must equal the truth's exactly
        row = con.execute(
            """
            SELECT count(*) FROM h_feedledger f JOIN h_truth t USING (key, ord)
            WHERE f.valid_from <> t.valid_from
            """
        ).fetchall()[0]
        info["feedledger_valid_from_differs_from_publisher_date"] = int(row[0])
    return info


def versions_of(con: duckdb.DuckDBPyConnection, name: str, key: str) -> list[dict[str, Any]]:
    rows = con.execute(
        f"SELECT ord, valid_from, deleted, attrs, recorded_at FROM h_{name} "
        "WHERE key = ? ORDER BY ord",
        [key],
    ).fetchall()
    out = []
    for ord_, valid_from, deleted, attrs, recorded_at in rows:
        values = None if deleted else dict(zip(ATTRS, attrs.split(SEP), strict=True))
        out.append(
            {
                "ord": int(ord_),
                "valid_from": valid_from.isoformat(sep=" ", timespec="seconds"),
                "deleted": bool(deleted),
                "values": values,
                "recorded_at": None
                if recorded_at is None
                else recorded_at.isoformat(sep=" ", timespec="seconds"),
            }
        )
    return out


def cmd_show(args: argparse.Namespace) -> dict[str, Any]:
    con, info = open_all(args)
    info["key"] = args.key
    info["histories"] = {name: versions_of(con, name, args.key) for name in info["tools"]}
    info["markdown"] = side_by_side(args.key, info["histories"])
    return info


def cmd_pick(args: argparse.Namespace) -> dict[str, Any]:
    """A parcel never deleted that changed on a --require day, the most often in --window."""
    con = duckdb.connect()
    days = _ints(args.days)
    load_truth(con, args.series, days, "truth")
    manifest = json.loads((args.series / "manifest.json").read_text())
    dates = [d["published_at"] for d in manifest["days"] if d["day"] in _ints(args.window)]
    in_window = ", ".join(f"TIMESTAMP '{d}'" for d in dates)
    need = _ints(args.require) if args.require else _ints(args.window)
    required = ", ".join(
        f"TIMESTAMP '{d['published_at']}'" for d in manifest["days"] if d["day"] in need
    )
    rows = con.execute(
        f"""
        SELECT key, count(*) FILTER (WHERE valid_from IN ({in_window})) AS changes_in_window,
               bool_or(deleted) AS ever_deleted, min(valid_from) AS first_seen
        FROM h_truth GROUP BY key
        HAVING count(*) FILTER (WHERE valid_from IN ({required})) >= 1 AND NOT ever_deleted
           AND first_seen = (SELECT min(valid_from) FROM h_truth)
        ORDER BY changes_in_window DESC, key
        LIMIT 1
        """
    ).fetchall()
    if not rows:
        return {"key": None}
    return {"key": rows[0][0], "changes_in_window": int(rows[0][1])}


def side_by_side(key: str, histories: dict[str, list[dict[str, Any]]]) -> str:
    """One row per state of the truth; per tool, the valid_from it gave that state."""
    truth = histories["truth"]
    varying = [a for a in ATTRS if len({(v["values"] or {}).get(a) for v in truth}) > 1]
    shown = varying or ATTRS[:2]
    tools = [t for t in ("feedledger", "dlt", "dbt") if t in histories]
    labels = {
        "feedledger": "feedledger `valid_from` (`recorded_at`)",
        "dlt": "dlt `_dlt_valid_from`",
        "dbt": "dbt `dbt_valid_from`",
    }
    head = ["publisher's file", *shown, *(labels[t] for t in tools)]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    # align each tool's versions with the truth's states, in order
    cursor = dict.fromkeys(tools, 0)
    for state in truth:
        cells = [state["valid_from"][:10]]
        if state["deleted"]:
            cells += ["(deleted)"] + [""] * (len(shown) - 1)
        else:
            cells += [state["values"][a] for a in shown]
        for t in tools:
            vs = histories[t]
            found = None
            for i in range(cursor[t], len(vs)):
                if vs[i]["deleted"] == state["deleted"] and vs[i]["values"] == state["values"]:
                    found = vs[i]
                    cursor[t] = i + 1
                    break
            if found is None:
                cells.append("— (state lost)")
            elif found.get("recorded_at"):
                cells.append(f"{found['valid_from'][:10]} ({found['recorded_at']})")
            else:
                cells.append(found["valid_from"])
        lines.append("| " + " | ".join(cells) + " |")
    for t in tools:
        extra = len(histories[t]) - cursor[t]
        if extra > 0:
            lines.append(f"\n({t} has {extra} version(s) after the last matching state)")
    counts = ", ".join(f"{t} {len(histories[t])}" for t in ["truth", *tools])
    lines += ["", f"Parcel `{key}`. Versions: {counts} (truth = the publisher's files)."]
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("compare", "show", "pick"):
        s = sub.add_parser(name)
        s.add_argument("--series", type=Path, required=True, help="gen_parcels output dir")
        s.add_argument("--days", required=True, help="observed days, e.g. 1,2,3,4,5")
        if name == "pick":
            s.add_argument("--window", required=True, help="days whose changes are counted")
            s.add_argument("--require", default=None, help="days one change must fall in")
            continue
        s.add_argument("--expect-days", default=None, help="a second truth: these days only")
        s.add_argument("--feedledger", type=Path, default=None, help="feedledger SQLite store")
        s.add_argument("--dlt", type=Path, default=None, help="dlt's DuckDB file")
        s.add_argument("--dbt", type=Path, default=None, help="dbt's DuckDB file")
        if name == "show":
            s.add_argument("key")
    a = p.parse_args(argv)
    result = {"compare": cmd_compare, "show": cmd_show, "pick": cmd_pick}[a.cmd](a)
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
