"""Payload readers on wide, odd and hostile input.

Wide payloads are read in a child process with a time limit and a memory cap: the old
fold built an expression tree that doubled with every field, so a regression hangs or
eats the machine; here it fails the test instead (a hang detector, not a timing
assertion)."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from feedledger.config import make_source
from feedledger.formats import read_observations, record_hash
from feedledger.formats.canonical import (
    NARROW,
    string_column_hashes,
    string_record_hash_expr,
)
from feedledger.model.errors import BadPayloadError
from helpers import Cli

HANG_S = 180  # far above the few seconds these take; only a hang or a blow-up reaches it
MEMORY_CAP = 6 << 30


def _xxh(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def ref_hash(record: dict[str, Any]) -> int:
    """The documented fold (formats/canonical.py), independently, on the xxhash package."""
    h, mask = 0x243F6A8885A308D3, (1 << 64) - 1
    for name in sorted(record):
        value = record[name]
        if value is None:
            tag, vh = 1, 0
        elif isinstance(value, str):
            tag, vh = 2, _xxh(value)
        else:
            text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
            tag, vh = 3, _xxh(text)
        for x in (_xxh(name), tag, vh):
            h = ((h ^ x) * 0x9E3779B97F4A7C15) & mask
    return h - (1 << 64) if h >= 1 << 63 else h


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def read(data: bytes, fmt: str = "csv", key: tuple[str, ...] = ("id",)) -> Any:
    return read_observations(data, make_source("s", key=key, format=fmt), label="p.x")


def refused(data: bytes, fmt: str = "csv", key: tuple[str, ...] = ("id",)) -> str:
    with pytest.raises(BadPayloadError) as info:
        read(data, fmt, key)
    message = str(info.value)
    assert "\n" not in message and len(message) <= 500, message
    return message


def in_child(code: str) -> str:
    """Run `code` in a fresh interpreter, time- and memory-capped; returns its stdout."""

    def cap() -> None:  # pragma: no cover - runs in the child
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            preexec_fn=cap,
            check=False,
            env={**os.environ, "POLARS_MAX_THREADS": "2"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {HANG_S} s (super-linear in the width?)")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# -- JSON, JSONL and Parquet are linear in the number of fields ----------------


def test_300_field_jsonl_json_and_parquet_read_and_hash_as_documented() -> None:
    out = in_child(
        """
        import io, json
        import pyarrow as pa, pyarrow.parquet as pq
        from feedledger.config import make_source
        from feedledger.formats import read_observations
        rows = [{"id": r, **{f"f{i:03d}": f"v{r}_{i}" for i in range(299)}} for r in range(50)]
        payloads = {
            "jsonl": "".join(json.dumps(r) + "\\n" for r in rows).encode(),
            "json": json.dumps(rows).encode(),
        }
        buf = io.BytesIO(); pq.write_table(pa.Table.from_pylist(rows), buf)
        payloads["parquet"] = buf.getvalue()
        for fmt, data in payloads.items():
            src = make_source("s", key=("id",), format=fmt)
            obs = read_observations(data, src, label="p")
            print(fmt, json.dumps(obs.frame["hash"].to_list()))
        """
    )
    rows = [{"id": r, **{f"f{i:03d}": f"v{r}_{i}" for i in range(299)}} for r in range(50)]
    expected = [ref_hash(r) for r in rows]
    got = dict(line.split(" ", 1) for line in out.splitlines())
    assert set(got) == {"jsonl", "json", "parquet"}
    for fmt, hashes in got.items():
        assert json.loads(hashes) == expected, fmt


def sparse_rows() -> list[dict[str, Any]]:
    rng = random.Random(8)
    names = [f"k{i}" for i in range(40)] + ["Ω", "a b", 'q"x', "_", "zz"]
    values: list[Any] = [None, "", "x", "1", 1, 1.5, True, [1, "a"], {"b": None, "a": [2]}]
    rows = []
    for r in range(120):
        fields = rng.sample(names, rng.randint(0, 40))
        rows.append({"id": r, **{f: rng.choice(values) for f in fields}})
    return rows


def test_records_with_different_fields_hash_as_documented(tmp_path: Path) -> None:
    """The fold skips absent fields: records of 1 to 41 fields, any subset, nulls, nested
    values, numbers; each hash equals the independent reference, and the attribute
    texts are the records."""
    rows = sparse_rows()
    path = tmp_path / "sparse.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = in_child(
        f"""
        import json
        from pathlib import Path
        from feedledger.config import make_source
        from feedledger.formats import read_observations
        src = make_source("s", key=("id",), format="jsonl")
        obs = read_observations(Path({str(path)!r}).read_bytes(), src, label="p")
        print(json.dumps(obs.frame["hash"].to_list()))
        print(json.dumps(obs.attributes(obs.frame["idx"]).to_list()))
        """
    )
    hashes, attrs = (json.loads(line) for line in out.splitlines())
    assert hashes == [ref_hash(r) for r in rows]
    assert [json.loads(a) for a in attrs] == rows


def test_golden_values_unchanged() -> None:
    # the same pins as test_canonical: stored content hashes must not move
    assert record_hash({"id": "1", "v": "a"}) == -960127989487283977
    assert record_hash({"id": "2", "v": ""}) == -5035511491414885470
    assert record_hash({}) == ref_hash({}) != record_hash({"a": None}) == ref_hash({"a": None})


# -- wide CSV is linear in cells -----------------------------------------------


def test_ten_thousand_column_csv_reads() -> None:
    out = in_child(
        """
        from feedledger.config import make_source
        from feedledger.formats import read_observations
        n = 10_000
        data = (",".join(["id"] + [f"c{i}" for i in range(1, n)]) + "\\n"
                + ",".join(str(i) for i in range(n)) + "\\n").encode()
        obs = read_observations(data, make_source("s", key=("id",)), label="p")
        print(obs.frame.height, len(obs.attributes(obs.frame["idx"])[0]))
        """
    )
    assert out.split()[0] == "1"


def test_wide_csv_hashes_equal_reference_and_expression(tmp_path: Path) -> None:
    cols = ["id"] + [f"c{i}" for i in range(1, 700)]
    rows = [
        [str(r)] + [f"{r}-{i}" if (r + i) % 7 else "" for i in range(1, 700)] for r in range(30)
    ]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(",".join(row) for row in [cols, *rows]) + "\n")
    out = in_child(
        f"""
        import json
        from pathlib import Path
        import polars as pl
        from feedledger.config import make_source
        from feedledger.formats import read_observations
        from feedledger.formats.canonical import string_record_hash_expr
        data = Path({str(path)!r}).read_bytes()
        obs = read_observations(data, make_source("s", key=("id",)), label="p")
        print(json.dumps(obs.frame["hash"].to_list()))
        raw = pl.read_csv(data, infer_schema=False, empty_string_is_null=False)
        print(json.dumps(raw.select(string_record_hash_expr(raw.columns))[:, 0].to_list()))
        """
    )
    from_reader, from_expr = (json.loads(line) for line in out.splitlines())
    records = [dict(zip(cols, row, strict=True)) for row in rows]
    assert from_reader == from_expr == [ref_hash(r) for r in records]


@pytest.mark.parametrize("width", [2, NARROW, NARROW + 1, 40])
def test_column_hashes_equal_reference(width: int) -> None:
    """Both ways of folding string columns (one expression up to NARROW fields, field by
    field over hashed blocks beyond) give the documented hash."""
    values = ["x", "", "Ω", 'q"', "a\nb", "1"]
    frame = pl.DataFrame(
        {
            f"c{(i * 7) % width:03d}_{i}": [values[(i + r) % 6] for r in range(5)]
            for i in range(width)
        }
    )
    expected = [ref_hash(r) for r in frame.to_dicts()]
    assert string_column_hashes(frame, frame.columns).to_list() == expected
    assert frame.select(string_record_hash_expr(frame.columns))[:, 0].to_list() == expected


# -- header and body read by one parser -----------------------------------------


def test_stray_quote_in_header_is_refused_not_zero_rows() -> None:
    message = refused(b'i"d,n\n1,a\n2,b\n', key=('i"d',))
    assert "header" in message and 'i"d' in message


def test_quoted_header_with_doubled_quote_is_read_like_the_body() -> None:
    obs = read(b'"i""d",n\n1,a\n2,"b""c"\n', key=('i"d',))
    assert obs.frame["key"].to_list() == ['["1"]', '["2"]']
    assert obs.attributes(obs.frame["idx"]).to_list() == [
        '{"i\\"d":"1","n":"a"}',
        '{"i\\"d":"2","n":"b\\"c"}',
    ]


def test_header_and_body_agree_on_quoted_line_breaks() -> None:
    obs = read(b'id,"multi\nline"\n1,"x\ny"\n')
    assert obs.attributes(obs.frame["idx"]).to_list() == ['{"id":"1","multi\\nline":"x\\ny"}']


def test_unbalanced_quote_opening_the_header_is_refused() -> None:
    assert "cannot parse CSV" in refused(b'"id,n\n1,a\n2,b\n')


def test_zero_rows_from_a_non_empty_body_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever swallows the body (here a parser stand-in that returns the header
    alone), zero rows read while the payload has records after its header is refused;
    a header-only payload is still an empty snapshot."""
    from feedledger.formats import csv_reader

    real = csv_reader._read
    monkeypatch.setattr(csv_reader, "_read", lambda data, src, label: real(data, src, label)[:1])
    assert "no rows were read" in refused(b"id,n\n1,a\n")
    assert read(b"id,n\n").height == 0
    assert read(b"id,n\n\n\n").height == 0


# -- JSON lines end at \n only ---------------------------------------------------


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_unicode_line_separators_are_characters_in_jsonl(sep: str) -> None:
    data = f'{{"id":1,"v":"a{sep}b"}}\r\n{{"id":2,"v":"{sep}"}}\n'.encode()
    obs = read(data, "jsonl")
    assert [json.loads(a)["v"] for a in obs.attributes(obs.frame["idx"]).to_list()] == [
        f"a{sep}b",
        sep,
    ]
    # between two objects it is not a line end: one line, and not valid JSON
    message = refused(f'{{"id":1}}{sep}{{"id":2}}\n'.encode(), "jsonl")
    assert "line 1" in message and "invalid JSON" in message


# -- blank keys and duplicate JSON field names ------------------------------------


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("csv", b"id,n\n1,a\n \t,b\n"),
        ("csv", 'id,n\n1,a\n"\u3000",b\n'.encode()),
        ("jsonl", b'{"id":"1"}\n{"id":"   "}\n'),
        ("json", b'[{"id":"1"},{"id":"\\t"}]'),
        ("parquet", parquet_bytes([{"id": "1"}, {"id": "  "}])),
    ],
)
def test_whitespace_only_key_is_refused(fmt: str, data: bytes) -> None:
    message = refused(data, fmt)
    assert "row 2" in message and "whitespace" in message


def test_blank_part_of_a_compound_key_is_refused_padded_keys_are_kept() -> None:
    assert "whitespace" in refused(b"a,b\n1, \n", key=("a", "b"))
    obs = read(b'{"id":" 1 "}\n', "jsonl")
    assert obs.frame["key"].to_list() == ['[" 1 "]']


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("jsonl", b'{"id":1}\n{"id":2,"id":3}\n'),
        ("json", b'[{"id":1,"id":2}]'),
        ("jsonl", b'{"id":1,"v":{"a":1,"a":2}}\n'),
    ],
)
def test_duplicate_json_field_name_is_refused(fmt: str, data: bytes) -> None:
    message = refused(data, fmt)
    assert "duplicate field name" in message


def test_duplicate_parquet_column_is_refused() -> None:
    table = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    assert "duplicate column" in refused(buf.getvalue(), "parquet")


# -- one-line errors, never tracebacks; lines capped ----------------------------


HOSTILE = [
    ("csv", "cr.csv", b"id,n\r1,a\r2,b\r", "bare CR"),
    ("jsonl", "cr.jsonl", b'{"id":1}\r{"id":2}\r', "bare CR"),
    ("json", "deep.json", b"[" * 100_000, "nested too deeply"),
    ("jsonl", "deep.jsonl", b'{"id":1,"v":' + b"[" * 100_000 + b"\n", "nested too deeply"),
    ("jsonl", "surrogate.jsonl", b'{"id":1,"v":"\\ud800"}\n', "surrogate"),
    ("json", "surrogate.json", b'[{"id":"\\udc00x"}]', "surrogate"),
    ("csv", "random.csv", random.Random(13).randbytes(4096), ""),
    ("jsonl", "random.jsonl", random.Random(14).randbytes(4096), ""),
    ("json", "random.json", random.Random(15).randbytes(4096), ""),
    ("parquet", "random.parquet", b"PAR1" + random.Random(16).randbytes(4096) + b"PAR1", ""),
]


@pytest.mark.parametrize(("fmt", "_name", "data", "fragment"), HOSTILE)
def test_hostile_payloads_are_one_line_errors(
    fmt: str, _name: str, data: bytes, fragment: str
) -> None:
    assert fragment in refused(data, fmt)


def test_crlf_and_nested_but_reasonable_json_still_read() -> None:
    assert read(b"id,n\r\n1,a\r\n", "csv").height == 1
    nested = b'{"id":1,"v":' + b"[" * 200 + b"]" * 200 + b"}\n"
    assert read(nested, "jsonl").height == 1


def test_error_lines_quoting_payload_content_are_capped() -> None:
    huge = "x" * 1_000_000
    cases = [
        ("csv", f"{huge},n\n1,2\n".encode()),  # missing key column, columns listed
        ("jsonl", f'{{"id":"{huge}"}}\n{{"id":"{huge}"}}\n'.encode()),  # duplicate key
        ("csv", f"id,n\n1,{huge}\n2,a,b\n".encode()),  # ragged line
        ("jsonl", f'{{"id":1,"{huge}":1,"{huge}":2}}\n'.encode()),  # duplicate field
    ]
    for fmt, data in cases:
        assert len(refused(data, fmt)) <= 500


def test_through_ingest_one_line_bytes_kept_under_rejected(cli: Cli, tmp_path: Path) -> None:
    from pipeline.bad_input_checks import is_archived, ledger_dump, one_message

    for fmt in ("csv", "jsonl", "json", "parquet"):
        cli("source", "add", f"s-{fmt}", "--key", "id", "--format", fmt)
    before = ledger_dump(cli.ws)
    rejected = cli.ws.archive_root / "rejected"
    for fmt, name, data, fragment in HOSTILE:
        path = tmp_path / name
        path.write_bytes(data)
        notes = set(rejected.rglob("*")) if rejected.exists() else set()
        result = cli("ingest", f"s-{fmt}", str(path), "--published-at", "2026-08-01", expect=4)
        message = one_message(result)
        assert fragment in message and name in message, message
        assert len(message) < 1000, message
        assert is_archived(cli.ws, data)
        assert set(rejected.rglob("*")) - notes, f"no note under rejected/ for {name}"
    assert ledger_dump(cli.ws) == before
