"""`Source.history_frame(keys=...)` takes a list of keys: a text given as `keys` (say
`keys="ab"`, or a parcel number) is a TypeError naming the parameter, never the history
of each of its characters read as keys; a non-iterable one too, in the same words.
SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import date

import pytest

import feedledger as fl
from feedledger.config import Workspace


def test_a_text_or_a_number_as_keys_is_a_type_error_naming_the_parameter(
    workspace: Workspace,
) -> None:
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v\na,1\nb,2\n", published_at=date(2026, 8, 1))
        for bad in ("ab", b"ab", 5):
            with pytest.raises(TypeError, match=r"history_frame: keys must be a list of keys"):
                s.history_frame(keys=bad)  # type: ignore[arg-type]
        # the forms that are right still answer
        assert s.history_frame(keys=["a", "b"])["key"].to_list() == ["a", "b"]
        assert s.history_frame(keys=("b",))["key"].to_list() == ["b"]
        assert s.history_frame("a")["v"].to_list() == ["1"]
        assert s.history_frame(keys=[]).height == 0
