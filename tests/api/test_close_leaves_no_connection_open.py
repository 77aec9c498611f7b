"""Closing a ledger closes its connections: after the entity reads of the Python API
(`history`, `history_frame`, `asof`, which on PostgreSQL keep a pipelined connection of
their own per thread) `Ledger.close()` leaves none for the garbage collector to find
open (psycopg's "ResourceWarning: ... was deleted while still open"). SQLite and
PostgreSQL."""

from __future__ import annotations

import gc
import warnings
from datetime import date

import feedledger as fl
from feedledger.config import Workspace


def test_entity_reads_then_close_leave_no_connection_open(workspace: Workspace) -> None:
    # what earlier tests of this worker process left for the collector is theirs, not
    # this test's: collected before the recording starts (CI once saw another file's
    # unclosed text file here, "unclosed file <_io.TextIOWrapper name=23>")
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        led = fl.open(workspace.config_path)
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v\na,1\n", published_at=date(2026, 8, 1))
        assert [v.attributes["v"] for v in s.history("a")] == ["1"]
        assert s.history_frame(keys=["a"]).height == 1
        assert s.asof("a", valid=date(2026, 8, 2)).status is fl.Presence.PRESENT
        led.close()
        del s, led
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []
