"""Each refusal says what is wrong with the payload (or the command line) in the user's
words: one line, the documented exit code, never a parser's or library's internals,
and for a payload the bytes kept under rejected/. Both backends (`cli` fixture)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pytest

from helpers import Cli

CSV = b"id,v\n1,a\n"


def _zip(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(name, data)
    return out.getvalue()


def _empty_zip() -> bytes:
    out = io.BytesIO()
    zipfile.ZipFile(out, "w").close()
    return out.getvalue()


def _refused(cli: Cli, tmp_path: Path, source: str, name: str, data: bytes) -> str:
    """The one error line of ingesting `data` as `name` (exit 4); its bytes are kept and
    noted under rejected/ (the line's tail says where)."""
    path = tmp_path / name
    path.write_bytes(data)
    result = cli("ingest", source, str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    problem, sep, kept = line.partition("; the bytes are kept at ")
    assert sep and Path(kept).read_bytes() == data, line
    assert any((cli.ws.archive_root / "rejected" / source).glob("*.json"))
    return problem


@pytest.fixture
def csv_source(cli: Cli) -> str:
    cli("source", "add", "feed", "--key", "id")
    return "feed"


def test_a_gzip_inside_a_gzip(cli: Cli, tmp_path: Path, csv_source: str) -> None:
    problem = _refused(cli, tmp_path, csv_source, "f.csv.gz", gzip.compress(gzip.compress(CSV)))
    assert problem == (
        "error: source 'feed', payload f.csv.gz: the payload is a gzip file inside a gzip "
        "file (compressed twice): feedledger undoes one layer; publish it compressed once"
    )


def test_a_zip_inside_a_zip(cli: Cli, tmp_path: Path, csv_source: str) -> None:
    data = _zip("inner.zip", _zip("f.csv", CSV))
    problem = _refused(cli, tmp_path, csv_source, "f.zip", data)
    assert problem == (
        "error: source 'feed', payload f.zip: the payload is a zip file inside a zip "
        "file (compressed twice): feedledger undoes one layer; publish it compressed once"
    )


def test_an_empty_zip(cli: Cli, tmp_path: Path, csv_source: str) -> None:
    problem = _refused(cli, tmp_path, csv_source, "f.zip", _empty_zip())
    assert problem == (
        "error: source 'feed', payload f.zip: the payload is an empty zip archive: it holds no file"
    )


def test_a_quote_inside_an_unquoted_csv_field(cli: Cli, tmp_path: Path, csv_source: str) -> None:
    problem = _refused(cli, tmp_path, csv_source, "q.csv", b'id,v\n0,ok\n1,a"b\n')
    assert problem == (
        "error: source 'feed', payload q.csv: cannot parse CSV: row 2 (line 3): field "
        "'a\"b' holds a quote but is not quoted (quote the whole field and double the "
        'quote inside: "a""b")'
    )


def test_an_unclosed_geojson_ring(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    ring = [[0, 0], [1, 0], [1, 1], [0, 1]]  # the first position not repeated
    layer = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "properties": {"id": "a"}, "geometry": None},
            {
                "type": "Feature",
                "properties": {"id": "b"},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            },
        ],
    }
    problem = _refused(cli, tmp_path, "zoning", "z.geojson", json.dumps(layer).encode())
    assert problem == (
        "error: source 'zoning', payload z.geojson: feature 2: a polygon ring is not "
        "closed (its last position must repeat its first)"
    )


def test_a_publisher_date_before_1970(cli: Cli, tmp_path: Path, csv_source: str) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(CSV)
    result = cli("ingest", csv_source, str(path), "--published-at", "0001-01-01", expect=2)
    assert result.stderr.strip() == (
        "error: source 'feed': the publisher date 0001-01-01T00:00:00+00:00 is before "
        "1970-01-01; the archive keeps dates from 1970-01-01 on"
    )


def test_a_bad_option_is_one_line_and_help_still_works(cli: Cli) -> None:
    result = cli("source", "add", "-rf", expect=2)
    assert result.stderr.strip().splitlines() == [
        "error: No such option: -r (see 'feedledger source add --help')"
    ]
    assert result.stdout == ""
    missing = cli("runs", expect=2)
    assert (
        missing.stderr.strip() == "error: Missing argument 'source' (see 'feedledger runs --help')"
    )
    shown = cli("source", "add", "--help")
    assert "Usage:" in shown.stdout and "--key" in shown.stdout
    group = cli("source", expect=None)  # a group without its command shows its help
    assert "Usage:" in group.stdout + group.stderr


def test_json_keys_compare_by_their_literal_text(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "nums", "--key", "id", "--format", "json")
    path = tmp_path / "n.json"
    path.write_bytes(b'[{"id": 1, "v": "a"}, {"id": 1.0, "v": "b"}, {"id": "1", "v": "c"}]')
    out = json.loads(
        cli("ingest", "nums", str(path), "--published-at", "2026-08-01", "--json").stdout
    )
    assert out["added"] == 3, out
    found = cli.json("asof", "nums", "1.0", "--valid", "2026-08-02")
    assert found["version"]["key"] == [1.0] and found["version"]["attributes"]["v"] == "b"
