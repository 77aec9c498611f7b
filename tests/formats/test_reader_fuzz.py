"""Every reader, fed random bytes, random nesting and random widths up
to 2,000 fields, either parses or raises the project's one-line payload error
(BadPayloadError), never another exception. Hypothesis' per-example deadline is the
hang detector (generous; nothing here asserts speed)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.config import make_source
from feedledger.formats import read_observations
from feedledger.model.errors import BadPayloadError

FORMATS = ("csv", "jsonl", "json", "parquet")
FUZZ = settings(
    max_examples=25,
    deadline=timedelta(seconds=30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)

pytestmark = pytest.mark.slow


def parses_or_one_line_error(data: bytes, fmt: str, key: tuple[str, ...] = ("id",)) -> None:
    src = make_source("fuzz", key=key, format=fmt)
    try:
        obs = read_observations(data, src, label="fuzz.bin")
    except BadPayloadError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, message
        assert len(message) <= 500, message
        return
    assert obs.frame.height == obs.raw.height
    obs.attributes(obs.frame["idx"])  # the texts a version would store can be built


# cell text: quotes, separators, line breaks, odd Unicode (no lone surrogates: a CSV
# file is bytes; invalid UTF-8 comes from the random-bytes cases)
cells = st.text(
    alphabet=st.sampled_from([*'ab1 ,"\n\r\t\\{}[]:', "\u2028", "\u0085", "Ω", "\x00"]),
    max_size=8,
)
widths = st.integers(min_value=1, max_value=2000)


@FUZZ
@given(fmt=st.sampled_from(FORMATS), data=st.binary(max_size=4096))
def test_random_bytes(fmt: str, data: bytes) -> None:
    parses_or_one_line_error(data, fmt)


@FUZZ
@given(
    fmt=st.sampled_from(FORMATS),
    prefix=st.sampled_from([b"id,n\n", b'{"id":1}\n', b'[{"id":1},', b"PAR1"]),
    data=st.binary(max_size=2048),
)
def test_plausible_start_then_random_bytes(fmt: str, prefix: bytes, data: bytes) -> None:
    parses_or_one_line_error(prefix + data, fmt)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


@FUZZ
@given(
    fmt=st.sampled_from(("jsonl", "json")),
    depth=st.integers(min_value=1, max_value=200_000),
    opener=st.sampled_from(["[", '{"a":']),
    closed=st.booleans(),
    value=json_values,
)
def test_random_nesting(fmt: str, depth: int, opener: str, closed: bool, value: Any) -> None:
    closer = "]" if opener == "[" else "}"
    nested = opener * depth + json.dumps(value) + (closer * depth if closed else "")
    record = '{"id":1,"v":' + nested + "}"
    data = record + "\n" if fmt == "jsonl" else "[" + record + "]"
    parses_or_one_line_error(data.encode(), fmt)


@FUZZ
@given(
    width=widths,
    height=st.integers(min_value=0, max_value=4),
    cell=cells,
    noise=st.lists(st.tuples(st.integers(0, 10**6), cells), max_size=6),
    crlf=st.booleans(),
)
def test_wide_csv(
    width: int, height: int, cell: str, noise: list[tuple[int, str]], crlf: bool
) -> None:
    header = ["id"] + [f"c{i}" for i in range(1, width)]
    rows = [[str(r)] + [cell] * (width - 1) for r in range(height)]
    grid = [header, *rows]
    for at, text in noise:  # a few cells anywhere (the header too) replaced by odd text
        row = grid[at % len(grid)]
        row[at % width] = text
    end = "\r\n" if crlf else "\n"
    data = end.join(",".join(row) for row in grid) + end
    parses_or_one_line_error(data.encode(), "csv")


@FUZZ
@given(
    fmt=st.sampled_from(("jsonl", "json", "parquet")),
    width=widths,
    height=st.integers(min_value=1, max_value=4),
    value=json_values,
    sparse=st.booleans(),
)
def test_wide_records(fmt: str, width: int, height: int, value: Any, sparse: bool) -> None:
    rows = []
    for r in range(height):
        step = r + 1 if sparse else 1
        rows.append({"id": r, **{f"f{i}": value for i in range(0, width - 1, step)}})
    if fmt == "parquet":
        buf = io.BytesIO()
        try:
            pq.write_table(pa.Table.from_pylist(rows), buf)
        except (pa.ArrowException, OverflowError, ValueError):
            return  # not representable in Arrow or Parquet: no file to read
        data = buf.getvalue()
    elif fmt == "jsonl":
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    else:
        data = json.dumps(rows).encode()
    parses_or_one_line_error(data, fmt)


@FUZZ
@given(
    fmt=st.sampled_from(FORMATS),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.integers(min_value=0, max_value=10**6),
)
def test_damaged_valid_payloads(fmt: str, flips: list[tuple[int, int]], cut: int) -> None:
    nested: dict[str, Any] = {"csv": 0, "parquet": [1, 2]}
    rows = [{"id": i, "name": f"n{i}", "v": nested.get(fmt, [i, {"x": "y"}])} for i in range(5)]
    if fmt == "csv":
        good = ("id,name,v\n" + "".join(f"{r['id']},{r['name']},{r['v']}\n" for r in rows)).encode()
    elif fmt == "jsonl":
        good = "".join(json.dumps(r) + "\n" for r in rows).encode()
    elif fmt == "json":
        good = json.dumps(rows).encode()
    else:
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        good = buf.getvalue()
    damaged = bytearray(good)
    for at, byte in flips:
        damaged[at % len(damaged)] = byte
    parses_or_one_line_error(bytes(damaged[: max(1, cut % (len(damaged) + 1))]), fmt)
