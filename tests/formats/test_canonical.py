"""The canonical encoding and content hash are a storage contract: pinned here."""

from __future__ import annotations

import json

import polars as pl
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.config import make_source
from feedledger.formats import read_observations, record_hash
from feedledger.formats.canonical import array_expr, object_expr, string_record_hash_expr


def _ref_json(d: dict[str, str]) -> str:
    return json.dumps(d, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _xxh(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def _ref_hash(record: dict[str, object]) -> int:
    """Independent implementation of the documented fold (formats/canonical.py)."""
    h = 0x243F6A8885A308D3
    mask = (1 << 64) - 1

    def mix(h: int, x: int) -> int:
        return ((h ^ x) * 0x9E3779B97F4A7C15) & mask

    for name in sorted(record):
        value = record[name]
        if value is None:
            tag, vh = 1, 0
        elif isinstance(value, str):
            tag, vh = 2, _xxh(value)
        else:
            tag, vh = 3, _xxh(json.dumps(value, separators=(",", ":")))
        h = mix(mix(mix(h, _xxh(name)), tag), vh)
    return h - (1 << 64) if h >= 1 << 63 else h


def test_golden_hash_values_are_pinned() -> None:
    # If these change, every stored content hash changes: that needs a migration.
    assert record_hash({"id": "1", "v": "a"}) == -960127989487283977
    assert record_hash({"id": "2", "v": ""}) == -5035511491414885470
    assert record_hash({"a": "1"}) == _ref_hash({"a": "1"})
    assert record_hash({"a": None}) == _ref_hash({"a": None})
    assert record_hash({}) != record_hash({"a": None})
    assert record_hash({"n": 1}) == _ref_hash({"n": 1}) != record_hash({"n": "1"})


text_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["a", "b", "Ω", "key", 'q"x', "t\tb"]),
            text_values,
            min_size=6,
            max_size=6,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_vectorised_csv_encoding_equals_json_dumps(rows: list[dict[str, str]]) -> None:
    cols = sorted(rows[0])
    frame = pl.DataFrame(
        {c: [r[c] for r in rows] for c in cols}, schema=dict.fromkeys(cols, pl.String)
    )
    got = frame.select(object_expr(cols, frame).alias("j"))["j"].to_list()
    assert got == [_ref_json(r) for r in rows]
    csv_hashes = frame.select(string_record_hash_expr(cols).alias("h"))["h"].to_list()
    assert csv_hashes == [_ref_hash(dict(r)) for r in rows] == [record_hash(r) for r in rows]
    keys = frame.select(array_expr(["a", "b"], frame).alias("k"))["k"].to_list()
    assert keys == [
        json.dumps([r["a"], r["b"]], ensure_ascii=False, separators=(",", ":")) for r in rows
    ]


def test_hash_matches_reference_implementation_on_real_payload() -> None:
    src = make_source("s", key=("id",))
    data = 'id,name,n\n1,"Hughes, A.",007\n2,"say ""hi""\nthere",2.10\n3,Ωmega,\n'.encode()
    obs = read_observations(data, src, label="p")
    attrs = obs.attributes(obs.frame["idx"]).to_list()
    assert attrs[1] == '{"id":"2","n":"2.10","name":"say \\"hi\\"\\nthere"}'
    assert attrs[2] == '{"id":"3","n":"","name":"Ωmega"}'
    assert obs.frame["hash"].to_list() == [_ref_hash(json.loads(a)) for a in attrs]


def test_compound_keys_are_field_by_field() -> None:
    src = make_source("s", key=("a", "b"))
    obs = read_observations(b"a,b,v\na,bc,1\nab,c,2\n", src, label="p")
    assert obs.frame["key"].to_list() == ['["a","bc"]', '["ab","c"]']
    assert obs.frame["kh"].n_unique() == 2


def test_json_numbers_kept_as_stated() -> None:
    src = make_source("s", key=("id",), format="jsonl")
    obs = read_observations(b'{"id": 1, "v": 1.10, "w": 1e5, "d": "2026-08-06"}\n', src, label="p")
    assert obs.attributes(obs.frame["idx"]).to_list() == [
        '{"d":"2026-08-06","id":1,"v":1.10,"w":1e5}'
    ]
    assert obs.frame["key"].to_list() == ["[1]"]


def test_csv_and_json_paths_hash_alike() -> None:
    csv_src = make_source("s", key=("id",))
    json_src = make_source("j", key=("id",), format="jsonl")
    a = read_observations(b'id,v,w\n1,"x,y",\n', csv_src, label="p")
    b = read_observations(b'{"w": "", "id": "1", "v": "x,y"}\n', json_src, label="p")
    assert a.frame["hash"].to_list() == b.frame["hash"].to_list()
    assert a.attributes(a.frame["idx"]).to_list() == b.attributes(b.frame["idx"]).to_list()


def test_csv_empty_fields_versus_missing_fields() -> None:
    import pytest

    from feedledger.model.errors import BadPayloadError

    src = make_source("s", key=("id",))
    ok = read_observations(b'id,a,b\n1,,x\n2,"",\n3,y,\n', src, label="p")
    assert ok.attributes(ok.frame["idx"]).to_list() == [
        '{"a":"","b":"x","id":"1"}',
        '{"a":"","b":"","id":"2"}',
        '{"a":"y","b":"","id":"3"}',
    ]
    for bad, row in ((b"id,a,b\n1,x,y\n2,\n", 2), (b'id,a,b\n1,x,y\n2,"q"\n', 2)):
        with pytest.raises(BadPayloadError, match=rf"row {row} \(line {row + 1}\).*fewer"):
            read_observations(bad, src, label="p")


@pytest.mark.parametrize(
    "idx",
    [
        [0, 1, 2, 3, 4, 5],  # the whole payload (a first load)
        [2, 3, 4],  # a consecutive run (one chunk of a first load)
        [4],
        [1, 2, 4],  # a gap
        [1, 1, 2],  # a repeat
        [3, 2, 1],  # descending
        [0, None, 2],  # a delete among them
        [],
    ],
)
def test_attribute_texts_by_index_equal_the_whole_payload_gathered(
    idx: list[int | None],
) -> None:
    """Observations.attributes takes a slice for a consecutive run, gathers otherwise;
    every path gives the texts of exactly the rows asked for, in that order."""
    import polars as pl

    from feedledger.config import make_source
    from feedledger.formats import read_observations

    src = make_source("s", key=("id",))
    data = b'id,v,w\n0,a,"x,1"\n1,b,\n2,"c ""q""",z\n3,d,z\n4,e,z\n5,f,z\n'
    obs = read_observations(data, src, label="p")
    every = obs._encode(obs.raw).to_list()  # the whole payload, in its own order
    got = obs.attributes(pl.Series("idx", idx, dtype=pl.UInt32)).to_list()
    assert got == [None if i is None else every[i] for i in idx]
