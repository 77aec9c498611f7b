"""A PostGIS destination's column types (sync/kinds/postgis_schema.py) as a function of
the JSON values a member has had: the type chosen takes every value seen, a value that
does not fit widens the column to one that takes the old values and the new, and a
column is never narrowed. A column typed from values in Python (`kind_of`) takes
what STAGED_SHAPE classifies of them in SQL (checked on PostgreSQL when it is set)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.sync.kinds import postgis_schema as schema

# PostgreSQL's jsonb refuses \u0000 (the table destination's `doc jsonb` as well)
texts = st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=5)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
    st.lists(st.integers(), max_size=2),
    st.dictionaries(texts, st.integers(), max_size=2),
)
ORDER = ["bigint", "double precision", "boolean", "jsonb", "text"]


@settings(deadline=None)  # a loaded machine: no timing in a property
@given(st.lists(values, max_size=6), st.lists(values, max_size=6))
def test_a_column_takes_every_value_seen_and_widens_only(old: list[Any], new: list[Any]) -> None:
    before = [schema.kind_of(v) for v in old]
    first = schema.sql_type(before)
    assert schema.widened(first, before) is None
    after = [schema.kind_of(v) for v in new]
    wider = schema.widened(first, after)
    final = first if wider is None else wider
    assert schema.widened(final, before + after) is None  # takes the old and the new
    if wider is not None:  # only ever to double precision (from bigint) or text
        assert (first, wider) == ("bigint", "double precision") or wider == "text"


def test_member_names_are_lower_case_and_never_the_tables_own() -> None:
    assert schema.column_of("Zone") == "zone"
    assert schema.column_of("KEY") == "_key" and schema.column_of("geom") == "_geom"
    assert schema.column_of("Deleted") == "_deleted"


def test_the_primary_key_is_an_integer_only_when_every_key_is() -> None:
    assert schema.pk_of(("Parcel_ID",), ["[1]", "[22]"]) == (
        "parcel_id", "bigint", "((key::jsonb ->> 0)::bigint)",
    )  # fmt: skip
    assert schema.pk_of(("id",), ["[1]", '["2"]'])[1] == "text"  # type: ignore[index]
    assert schema.pk_of(("id",), [])[1] == "text"  # type: ignore[index]
    assert schema.pk_of(("a", "b"), ['["x",1]']) is None


@pytest.mark.skipif(not os.environ.get("FEEDLEDGER_TEST_POSTGRES_URL"), reason="no PostgreSQL")
@settings(max_examples=30, deadline=None)
@given(st.lists(values, min_size=1, max_size=8))
def test_the_staged_batch_is_classified_in_sql_as_in_python(batch: list[Any]) -> None:
    import psycopg

    with psycopg.connect(os.environ["FEEDLEDGER_TEST_POSTGRES_URL"]) as conn:
        conn.execute("CREATE TEMP TABLE fl_stage (doc text, geometry_wkb bytea) ON COMMIT DROP")
        for v in batch:
            conn.execute("INSERT INTO fl_stage VALUES (%s, NULL)", (json.dumps({"m": v}),))
        got = [(r[1], r[2]) for r in conn.execute(schema.STAGED_SHAPE).fetchall()]
    assert {m for m, _k in got} == {"m"}
    # a column typed from the ledger's sample (Python) takes what SQL sees of the same
    # values (jsonb may write a float with an integral value as an integer: 1e16)
    typed = schema.sql_type(schema.kind_of(v) for v in batch)
    assert schema.widened(typed, [k for _m, k in got]) is None, (typed, got)
