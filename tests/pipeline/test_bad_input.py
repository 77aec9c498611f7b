"""Bad input (Invariant 10): a clear error naming the source, the payload and the
problem; the ledger exactly as it was; the raw bytes still in the archive.

Every store case runs after a good first payload was applied, so "ledger unchanged"
compares a non-empty ledger, on SQLite and on PostgreSQL (`cli`/`workspace` fixtures).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tomlkit
from typer.testing import Result

from feedledger.config import Workspace
from helpers import Cli
from pipeline.bad_input_checks import is_archived, ledger_dump, one_message

FIRST = "2026-08-01"
NEXT = "2026-08-02"

# Exit codes (model/errors.py)
CONFIG, NOT_FOUND, BAD_PAYLOAD, MASS_DELETE, STALE, STORE_UNAVAILABLE = 2, 3, 4, 5, 6, 8


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


GOOD: dict[str, bytes] = {
    "csv": b"id,zoning\n1,R1\n2,C2\n3,A1\n",
    "jsonl": b'{"id":1,"zoning":"R1"}\n{"id":2,"zoning":"C2"}\n{"id":3,"zoning":"A1"}\n',
    "json": b'[{"id":1,"zoning":"R1"},{"id":2,"zoning":"C2"},{"id":3,"zoning":"A1"}]',
    "parquet": _parquet(
        [{"id": 1, "zoning": "R1"}, {"id": 2, "zoning": "C2"}, {"id": 3, "zoning": "A1"}]
    ),
}


# -- helpers ---------------------------------------------------------------------------


def source_name(fmt: str) -> str:
    return f"parcels-{fmt}"


@pytest.fixture
def good_source(cli: Cli, tmp_path: Path) -> Callable[[str], str]:
    """Declare a source of the given format and apply a good first payload to it."""

    def make(fmt: str) -> str:
        name = source_name(fmt)
        cli("source", "add", name, "--key", "id", "--format", fmt)
        path = tmp_path / f"good_{FIRST}.{fmt}"
        path.write_bytes(GOOD[fmt])
        applied = cli.json("ingest", name, str(path), "--published-at", FIRST)
        assert applied["status"] == "applied" and applied["added"] == 3
        return name

    return make


def ingest_refused(
    cli: Cli,
    tmp_path: Path,
    source: str,
    file_name: str,
    data: bytes,
    *,
    code: int,
    published_at: str = NEXT,
) -> str:
    """Ingest bad bytes: refused with `code` and one message naming source and payload,
    ledger unchanged, bytes archived. Returns the message."""
    before = ledger_dump(cli.ws)
    path = tmp_path / file_name
    path.write_bytes(data)
    result = cli("ingest", source, str(path), "--published-at", published_at, expect=code)
    message = one_message(result)
    assert f"'{source}'" in message, message
    assert file_name in message, message
    assert ledger_dump(cli.ws) == before
    assert is_archived(cli.ws, data), "the refused bytes must be kept for inspection"
    return message


# -- malformed payloads ----------------------------------------------------------------

# (format, file name, bytes, fragments the message must contain)
BAD_PAYLOADS = [
    pytest.param(
        "csv",
        "no_key_column.csv",
        b"parcel,zoning\n1,R1\n2,C2\n",
        ["missing key column", "'id'"],
        id="csv-missing-key-column",
    ),
    pytest.param(
        "jsonl",
        "no_key_field.jsonl",
        b'{"parcel":1}\n{"parcel":2}\n',
        ["missing key field", "'id'"],
        id="jsonl-missing-key-field",
    ),
    pytest.param(
        "json",
        "no_key_field.json",
        b'[{"parcel":1}]',
        ["missing key field", "'id'"],
        id="json-missing-key-field",
    ),
    pytest.param(
        "parquet",
        "no_key_field.parquet",
        _parquet([{"parcel": 1}]),
        ["missing key field", "'id'"],
        id="parquet-missing-key-field",
    ),
    pytest.param(
        "parquet",
        "null_key.parquet",
        _parquet([{"id": 1}, {"id": None}]),
        ["row 2", "null or empty key"],
        id="parquet-null-key",
    ),
    pytest.param(
        "parquet",
        "dupes.parquet",
        _parquet([{"id": 7}, {"id": 7}]),
        ["duplicate key", "7", "rows 1, 2"],
        id="parquet-duplicate-key",
    ),
    pytest.param(
        "csv",
        "empty_key.csv",
        b"id,zoning\n1,R1\n,C2\n3,A1\n",
        ["row 2", "empty key"],
        id="csv-empty-key",
    ),
    pytest.param(
        "jsonl",
        "null_key.jsonl",
        b'{"id":1}\n{"id":null}\n',
        ["row 2", "null or empty key"],
        id="jsonl-null-key",
    ),
    pytest.param(
        "jsonl",
        "blank_key.jsonl",
        b'{"id":""}\n{"id":2}\n',
        ["row 1", "null or empty key"],
        id="jsonl-empty-string-key",
    ),
    pytest.param(
        "json",
        "null_key.json",
        b'[{"id":1},{"id":2},{"id":null}]',
        ["row 3", "null or empty key"],
        id="json-null-key",
    ),
    pytest.param(
        "json",
        "blank_key.json",
        b'[{"id":""},{"id":2}]',
        ["row 1", "null or empty key"],
        id="json-empty-string-key",
    ),
    pytest.param(
        "jsonl",
        "absent_key.jsonl",
        b'{"id":1}\n{"zoning":"R1"}\n',
        ["row 2", "null or empty key"],
        id="jsonl-key-absent-in-one-record",
    ),
    pytest.param(
        "csv",
        "dupes.csv",
        b"id,zoning\n1,R1\n2,C2\n1,A1\n",
        ["duplicate key", '"1"', "rows 1, 3"],
        id="csv-duplicate-key",
    ),
    pytest.param(
        "jsonl",
        "dupes.jsonl",
        b'{"id":5}\n{"id":6}\n{"id":5}\n',
        ["duplicate key", "5", "rows 1, 3"],
        id="jsonl-duplicate-key",
    ),
    pytest.param(
        "json",
        "dupes.json",
        b'[{"id":5},{"id":6},{"id":6}]',
        ["duplicate key", "6", "rows 2, 3"],
        id="json-duplicate-key",
    ),
    pytest.param(
        "csv",
        "ragged.csv",
        b"id,zoning\n1,R1\n2,C2,EXTRA\n3,A1\n",
        ["cannot parse CSV"],
        id="csv-ragged-long-line",
    ),
    pytest.param(
        "csv",
        "quote.csv",
        b'id,zoning\n1,R1\n"2,C2\n3,A1\n',
        ["cannot parse CSV"],
        id="csv-unterminated-quote",
    ),
    pytest.param(
        "jsonl",
        "broken.jsonl",
        b'{"id":1}\n{"id":2,\n{"id":3}\n',
        ["line 2", "invalid JSON"],
        id="jsonl-bad-line",
    ),
    pytest.param(
        "jsonl",
        "broken_after_blank.jsonl",
        b'{"id":1}\n\n{"id":\n',
        ["line 3", "invalid JSON"],
        id="jsonl-bad-line-after-blank",
    ),
    pytest.param(
        "jsonl",
        "not_object.jsonl",
        b'{"id":1}\n[2]\n',
        ["row 2", "not a JSON object"],
        id="jsonl-not-an-object",
    ),
    pytest.param(
        "json", "broken.json", b'[{"id":1},{"id":2}', ["invalid JSON"], id="json-truncated"
    ),
    pytest.param("json", "nan.json", b'[{"id":1,"area":NaN}]', ["invalid JSON"], id="json-nan"),
    pytest.param(
        "parquet",
        "random.parquet",
        bytes(range(256)) * 8,
        ["cannot parse Parquet"],
        id="parquet-random-bytes",
    ),
    pytest.param(
        "parquet",
        "truncated.parquet",
        GOOD["parquet"][:-40],
        ["cannot parse Parquet"],
        id="parquet-truncated",
    ),
    pytest.param(
        "csv",
        "latin1.csv",
        b"id,zoning\n1,R1\n2,Z\xfcrich\n",
        ["invalid UTF-8", "line 3"],
        id="csv-invalid-utf8",
    ),
    pytest.param(
        "csv",
        "latin1_header.csv",
        b"id,zon\xe9\n1,R1\n",
        ["invalid UTF-8", "line 1"],
        id="csv-invalid-utf8-header",
    ),
    pytest.param(
        "jsonl",
        "latin1.jsonl",
        b'{"id":1}\n{"id":"Z\xfcrich"}\n',
        ["invalid UTF-8", "line 2"],
        id="jsonl-invalid-utf8",
    ),
    pytest.param(
        "json", "latin1.json", b'[{"id":"Z\xfcrich"}]', ["invalid UTF-8"], id="json-invalid-utf8"
    ),
    pytest.param("csv", "empty.csv", b"", ["empty"], id="csv-empty-file"),
    pytest.param("jsonl", "empty.jsonl", b"", ["empty"], id="jsonl-empty-file"),
    pytest.param("json", "empty.json", b"", ["empty"], id="json-empty-file"),
    pytest.param("parquet", "empty.parquet", b"", ["empty"], id="parquet-empty-file"),
]


@pytest.mark.parametrize(("fmt", "file_name", "data", "fragments"), BAD_PAYLOADS)
def test_bad_payload_is_refused_clearly_and_kept(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    fmt: str,
    file_name: str,
    data: bytes,
    fragments: list[str],
) -> None:
    source = good_source(fmt)
    message = ingest_refused(cli, tmp_path, source, file_name, data, code=BAD_PAYLOAD)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), (fragment, message)


def test_csv_ragged_line_error_names_the_row(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    source = good_source("csv")
    message = ingest_refused(
        cli,
        tmp_path,
        source,
        "ragged.csv",
        b"id,zoning\n1,R1\n2,C2,EXTRA\n3,A1\n",
        code=BAD_PAYLOAD,
    )
    # data row 2 is line 3 of the file; either way of counting is clear
    assert re.search(r"\brows? 2\b|\bline 3\b", message), message


def test_csv_short_line_is_refused_with_its_row(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    source = good_source("csv")
    message = ingest_refused(
        cli, tmp_path, source, "short.csv", b"id,zoning\n1,R1\n2\n3,A1\n", code=BAD_PAYLOAD
    )
    assert re.search(r"\brows? 2\b|\bline 3\b", message), message
    assert "fewer fields" in message


def test_whitespace_only_payload_is_refused_as_empty(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    source = good_source("csv")
    message = ingest_refused(cli, tmp_path, source, "blank.csv", b"\n \n", code=BAD_PAYLOAD)
    assert "empty" in message


# -- bad command-line values, unknown source, unreachable store ------------------------


@pytest.mark.parametrize(
    "value", ["2026-13-45", "yesterday", "08/02/2026", "2026-08-02T25:00:00", ""]
)
def test_unparseable_published_at(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    value: str,
) -> None:
    source = good_source("csv")
    message = ingest_refused(
        cli, tmp_path, source, "next.csv", b"id,zoning\n1,R1\n", code=CONFIG, published_at=value
    )
    assert "--published-at" in message
    assert "YYYY-MM-DD" in message


def test_unknown_source(cli: Cli, tmp_path: Path, good_source: Callable[[str], str]) -> None:
    good_source("csv")
    before = ledger_dump(cli.ws)
    data = b"id,zoning\n1,R1\n"
    path = tmp_path / "orphan.csv"
    path.write_bytes(data)
    result = cli("ingest", "no-such-source", str(path), "--published-at", NEXT, expect=NOT_FOUND)
    message = one_message(result)
    assert "'no-such-source'" in message and "unknown source" in message
    assert source_name("csv") in message, "the hint should list the known sources"
    assert ledger_dump(cli.ws) == before
    assert is_archived(cli.ws, data)


def test_unknown_source_message_names_the_payload(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    good_source("csv")
    path = tmp_path / "orphan.csv"
    path.write_bytes(b"id,zoning\n1,R1\n")
    result = cli("ingest", "no-such-source", str(path), "--published-at", NEXT, expect=NOT_FOUND)
    assert "orphan.csv" in one_message(result)


def _unreachable_url(kind: str, tmp_path: Path) -> str:
    if kind == "postgresql":
        return "postgresql://postgres@127.0.0.1:1/nope"
    # A path whose parent "directory" is a regular file: it can never be created
    # (a chmod'ed folder would not do: the tests may run as root).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    return f"sqlite:///{blocker / 'sub' / 'ledger.db'}"


def _point_store_at(ws: Workspace, url: str) -> str:
    """Rewrite feedledger.toml's store URL; returns the old text to restore."""
    old = ws.config_path.read_text(encoding="utf-8")
    doc = tomlkit.parse(old)
    doc["store"]["url"] = url  # type: ignore[index]
    ws.config_path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return old


def _ingest_with_store(
    cli: Cli,
    tmp_path: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Result, bytes, Path, str]:
    monkeypatch.delenv("FEEDLEDGER_STORE", raising=False)
    data = b"id,zoning\n1,R1\n2,C9\n3,A1\n"
    path = tmp_path / "while_down.csv"
    path.write_bytes(data)
    old = _point_store_at(cli.ws, _unreachable_url(kind, tmp_path))
    try:
        result = cli("ingest", source_name("csv"), str(path), "--published-at", NEXT, expect=None)
    finally:
        cli.ws.config_path.write_text(old, encoding="utf-8")
    return result, data, path, old


UNREACHABLE = ["postgresql", "sqlite-uncreatable-path"]


@pytest.mark.parametrize("kind", UNREACHABLE)
def test_unreachable_store_keeps_the_payload_and_the_ledger(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good_source("csv")
    before = ledger_dump(cli.ws)
    result, data, path, _ = _ingest_with_store(cli, tmp_path, kind, monkeypatch)
    assert result.exit_code != 0
    assert ledger_dump(cli.ws) == before
    assert is_archived(cli.ws, data), "the payload must be archived before the store is used"
    # Once the store is back, the same command applies the archived payload.
    applied = cli.json("ingest", source_name("csv"), str(path), "--published-at", NEXT)
    assert applied["status"] == "applied" and applied["changed"] == 1
    assert applied["archived"] is False, "the bytes were already archived during the outage"


@pytest.mark.parametrize(
    "kind",
    [
        "postgresql",
        "sqlite-uncreatable-path",
    ],
)
def test_unreachable_store_says_so(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good_source("csv")
    result, *_ = _ingest_with_store(cli, tmp_path, kind, monkeypatch)
    assert result.exit_code == STORE_UNAVAILABLE, (result.exit_code, result.exception)
    message = one_message(result)
    assert "cannot reach the store" in message
    assert "feedledger.toml" in message


def test_unreachable_store_message_names_source_and_payload(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good_source("csv")
    result, *_ = _ingest_with_store(cli, tmp_path, "postgresql", monkeypatch)
    message = one_message(result)
    assert f"'{source_name('csv')}'" in message and "while_down.csv" in message


# -- publisher order, ambiguity, repeats ---------------------------------------------------


@pytest.mark.parametrize("when", ["2026-08-03", "2026-08-04T23:59:59.999999Z", "2026-07-31"])
def test_payload_not_after_the_watermark_is_refused(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
    when: str,
) -> None:
    source = good_source("csv")
    later = tmp_path / "later.csv"
    later.write_bytes(b"id,zoning\n1,R1\n2,C2\n3,A2\n")
    cli("ingest", source, str(later), "--published-at", "2026-08-05")
    message = ingest_refused(
        cli,
        tmp_path,
        source,
        "late.csv",
        b"id,zoning\n1,R7\n2,C2\n3,A1\n",
        code=STALE,
        published_at=when,
    )
    assert "watermark" in message and "2026-08-05" in message
    assert "replay" in message and "backfill" in message


def test_different_bytes_with_the_same_publisher_timestamp_are_ambiguous(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    source = good_source("csv")
    data = b"id,zoning\n1,R1\n2,C2\n3,A9\n"
    message = ingest_refused(
        cli, tmp_path, source, "rival.csv", data, code=BAD_PAYLOAD, published_at=FIRST
    )
    assert "ambiguous" in message
    assert "2026-08-01" in message
    rejected = cli.ws.archive_root / "rejected" / source
    assert any(rejected.glob("*.json")), "the rival's sidecar is kept under rejected/"
    # the same instant written another way is the same publisher timestamp
    ingest_refused(
        cli,
        tmp_path,
        source,
        "rival2.csv",
        data + b"4,X\n",
        code=BAD_PAYLOAD,
        published_at="2026-08-01T02:00:00+02:00",
    )


def test_identical_bytes_again_are_already_applied(
    cli: Cli,
    tmp_path: Path,
    good_source: Callable[[str], str],
) -> None:
    source = good_source("csv")
    before = ledger_dump(cli.ws)
    runs_before = cli.json("runs", source)
    again = tmp_path / f"good_{FIRST}.csv"
    result = cli("ingest", source, str(again), "--published-at", FIRST)
    assert "already applied" in result.stdout and "nothing changed" in result.stdout
    # the same bytes under another name, the same instant written another way
    renamed = tmp_path / "renamed.csv"
    renamed.write_bytes(GOOD["csv"])
    out = cli.json("ingest", source, str(renamed), "--published-at", "2026-08-01T00:00:00Z")
    assert out["status"] == "already_applied" and out["changes"] == 0
    assert out["run_id"] is None and out["applied_by_run"] == runs_before[0]["run_id"]
    assert ledger_dump(cli.ws) == before
    assert cli.json("runs", source) == runs_before, "a repeat must not start a new run"


def test_mass_delete_guard(cli: Cli, tmp_path: Path) -> None:
    source = "guarded"
    cli("source", "add", source, "--key", "id")
    first = tmp_path / "four.csv"
    first.write_bytes(b"id,zoning\n1,R1\n2,C2\n3,A1\n4,B1\n")
    cli("ingest", source, str(first), "--published-at", FIRST)

    # 75% deleted: refused
    message = ingest_refused(
        cli,
        tmp_path,
        source,
        "one_left.csv",
        b"id,zoning\n1,R1\n",
        code=MASS_DELETE,
        published_at="2026-08-02",
    )
    assert "3 of 4" in message and "--allow-mass-delete" in message

    # a header-only export deletes everything: refused, then accepted when allowed
    header_only = b"id,zoning\n"
    message = ingest_refused(
        cli,
        tmp_path,
        source,
        "header_only.csv",
        header_only,
        code=MASS_DELETE,
        published_at="2026-08-03",
    )
    assert "4 of 4" in message and "--allow-mass-delete" in message
    forced = cli.json(
        "ingest",
        source,
        str(tmp_path / "header_only.csv"),
        "--published-at",
        "2026-08-03",
        "--allow-mass-delete",
    )
    assert forced["status"] == "applied" and forced["deleted"] == 4
    assert cli.json("watermark", source)["published_at"].startswith("2026-08-03")
    assert cli.json("history", source, "1")[-1]["deleted"] is True


def test_mass_delete_guard_allows_exactly_the_threshold(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "half", "--key", "id")
    first = tmp_path / "four.csv"
    first.write_bytes(b"id,zoning\n1,R1\n2,C2\n3,A1\n4,B1\n")
    cli("ingest", "half", str(first), "--published-at", FIRST)
    half = tmp_path / "half.csv"
    half.write_bytes(b"id,zoning\n1,R1\n2,C2\n")
    out = cli.json("ingest", "half", str(half), "--published-at", NEXT)
    assert out["status"] == "applied" and out["deleted"] == 2


# -- bad `source add` values -----------------------------------------------------------------


@pytest.fixture
def config_cli(tmp_path: Path) -> Cli:
    """A workspace for config-only commands (no store needed, so one backend)."""
    ws = Workspace.create(
        tmp_path / "cfg", store_url=f"sqlite:///{tmp_path / 'cfg.db'}", archive=None
    )
    cli = Cli(ws)
    cli("source", "add", "existing", "--key", "id")
    return cli


@pytest.mark.parametrize(
    ("name", "args", "fragment"),
    [
        ("s1", ["--key", "id", "--timezone", "Mars/Olympus_Mons"], "Mars/Olympus_Mons"),
        ("s1", ["--key", "id", "--timezone", ""], "timezone"),
        ("s1", ["--key", "id", "--cadence", "0 6 * *"], "cadence"),
        ("s1", ["--key", "id", "--cadence", "61 6 * * *"], "cadence"),
        ("s1", ["--key", "id", "--cadence", "hourly"], "hourly"),
        ("s1", ["--key", "id", "--format", "xml"], "format"),
        ("s1", ["--key", "id", "--kind", "delta"], "kind"),
        ("s1", ["--key", ""], "key"),
        ("s1", ["--key", "a,,b"], "key"),
        ("s1", ["--key", " "], "key"),
        ("s1", ["--key", "a,a"], "key"),
        ("s1", ["--key", "id", "--published-from", "yesterday"], "published_from"),
        ("s1", ["--key", "id", "--published-from", "field:"], "published_from"),
        ("s1", ["--key", "id", "--mass-delete-threshold", "1.5"], "mass_delete_threshold"),
        ("bad name!", ["--key", "id"], "bad name!"),
        ("existing", ["--key", "id"], "already declared"),
    ],
)
def test_bad_source_declaration_leaves_config_unchanged(
    config_cli: Cli,
    name: str,
    args: list[str],
    fragment: str,
) -> None:
    before = config_cli.ws.config_path.read_bytes()
    listed = config_cli.json("source", "list")
    result = config_cli("source", "add", name, *args, expect=CONFIG)
    message = one_message(result)
    assert fragment in message, message
    assert config_cli.ws.config_path.read_bytes() == before
    assert config_cli.json("source", "list") == listed
    assert not list(config_cli.ws.root.glob("*.tmp")), "no half-written config left behind"


def test_source_add_error_with_json_keeps_stdout_empty(config_cli: Cli) -> None:
    """--json callers get no half JSON on stdout: the error is one line on stderr."""
    before = config_cli.ws.config_path.read_bytes()
    result = config_cli(
        "source", "add", "s2", "--key", "id", "--kind", "delta", "--json", expect=CONFIG
    )
    one_message(result)  # also asserts stdout is empty
    assert config_cli.ws.config_path.read_bytes() == before
