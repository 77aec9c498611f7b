"""`feedledger search NAME "query"` over a tantivy destination (on the ledger's both
backends): BM25 ranking, field queries, a name with an apostrophe, deleted records never
found, --limit and --json, and one-line errors for an unknown destination, another kind
of destination, a bad query."""

from __future__ import annotations

from pathlib import Path

from feedledger.config import Workspace
from helpers import Cli

ROWS = {
    "A-1": ("Oak Street", "residential", "oak oak oak grove"),
    "B-2": ("Main Street", "commercial", "oak corner shop"),
    "C-3": ("Elm Road", "residential", "quiet elm lane"),
    "D-4": ("Oak Avenue", "industrial", "warehouse"),
    "E-5": ("Birch Lane", "residential", "sold by O'Brien"),
}


def _csv(tmp: Path, name: str, rows: dict[str, tuple[str, str, str]]) -> Path:
    path = tmp / name
    lines = ["id,street,zone,notes", *(f"{k},{s},{z},{n}" for k, (s, z, n) in rows.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _index(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "parcels", "--key", "id", "--format", "csv")
    cli("ingest", "parcels", str(_csv(tmp_path, "d1.csv", ROWS)), "--published-at", "2026-08-01")
    cli("destination", "add", "idx", "--source", "parcels", "--tantivy", str(tmp_path / "ix"),
        "--text-fields", "street,zone,notes")  # fmt: skip
    cli("manifest", "create", "all", "--source", "parcels")
    cli.json("sync", "idx", "--manifest", "all")


def test_search_ranks_by_bm25_and_answers_field_queries(cli: Cli, tmp_path: Path) -> None:
    _index(cli, tmp_path)
    found = cli.json("search", "idx", "oak")
    keys = [h["key"] for h in found["hits"]]
    assert found["total"] == 3 and set(map(tuple, keys)) == {("A-1",), ("B-2",), ("D-4",)}
    # an apostrophe, which tantivy's strict parser refuses, in a name a user types
    for query in ("o'brien", "O'Brien", "notes:o'brien"):
        named = cli.json("search", "idx", query)
        assert [h["key"] for h in named["hits"]] == [["E-5"]], (query, named)
    assert keys[0] == ["A-1"]  # "oak" four times in a short document ranks first
    scores = [h["score"] for h in found["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert found["hits"][0]["doc"]["street"] == "Oak Street"
    zone = cli.json("search", "idx", "zone:residential")
    assert sorted(h["key"][0] for h in zone["hits"]) == ["A-1", "C-3", "E-5"]
    both = cli.json("search", "idx", "zone:residential AND street:oak")
    assert [h["key"] for h in both["hits"]] == [["A-1"]]
    phrase = cli.json("search", "idx", '"corner shop"')
    assert [h["key"] for h in phrase["hits"]] == [["B-2"]]
    one = cli.json("search", "idx", "oak", "--limit", "1")
    assert one["total"] == 3 and len(one["hits"]) == 1
    shown = cli("search", "idx", "elm").stdout
    assert "C-3" in shown and "1 matching" in shown


def test_a_deleted_or_changed_record_is_found_as_it_is_now(cli: Cli, tmp_path: Path) -> None:
    _index(cli, tmp_path)
    day2 = {k: v for k, v in ROWS.items() if k != "A-1"}
    day2["C-3"] = ("Elm Road", "residential", "oak sapling planted")
    cli("ingest", "parcels", str(_csv(tmp_path, "d2.csv", day2)), "--published-at", "2026-08-02")
    cli.json("sync", "idx", "--live", "--once")
    found = cli.json("search", "idx", "oak")
    assert sorted(h["key"][0] for h in found["hits"]) == ["B-2", "C-3", "D-4"]
    assert cli.json("search", "idx", "grove")["total"] == 0  # the deleted record's words


def test_search_errors_are_one_line(cli: Cli, workspace: Workspace, tmp_path: Path) -> None:
    _index(cli, tmp_path)
    cli("destination", "add", "tbl", "--source", "parcels", "--sqlite",
        str(tmp_path / "d.db"), "--table", "t")  # fmt: skip
    for args, says in [
        (("nope", "oak"), "nope"),
        (("tbl", "oak"), "not a tantivy index"),
        (("idx", "zone:(oak"), "bad query"),
        (("idx", "owner:smith"), "bad query"),
        (("idx", "(oak"), "bad query"),
        (("idx", "oak", "--limit", "0"), "--limit"),
    ]:
        result = cli("search", *args, expect=None)
        assert result.exit_code != 0, args
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert lines and lines[0].startswith("error:") and says in lines[0], (args, lines)
        assert "Traceback" not in result.stderr


def test_a_tantivy_destination_is_declared_by_its_folder(cli: Cli, tmp_path: Path) -> None:
    _index(cli, tmp_path)
    shown = cli("destination", "list", "--json").stdout
    assert '"kind": "tantivy"' in shown or '"kind":"tantivy"' in shown
    for args, says in [
        (("--tantivy", str(tmp_path / "ix")), "already the index of destination idx"),
        (("--tantivy", str(tmp_path / "ix2"), "--table", "t"), "takes no --table"),
        (("--tantivy", str(tmp_path / "ix3"), "--text-fields", "fl_x"), "cannot be a tantivy"),
        (("--tantivy", str(tmp_path / "ix4"), "--sqlite", "x.db"), "exactly one of"),
    ]:
        got = cli("destination", "add", "again", "--source", "parcels", *args, expect=None)
        assert got.exit_code != 0 and says in got.stderr, (args, got.stderr)
