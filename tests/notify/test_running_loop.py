"""`Ledger.notify.dispatch` is a plain function: it works called from a thread whose
event loop is running (a notebook's; Playwright's sync API marks its loop as running
between calls), where asyncio.run alone refuses ("cannot be called from a running
event loop"). The dispatcher's loop then runs in a thread of its own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import feedledger as fl
from feedledger.config import Workspace


def test_dispatch_from_inside_a_running_event_loop(workspace: Workspace, tmp_path: Path) -> None:
    out = tmp_path / "sub.jsonl"
    with fl.open(workspace.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        led.notify.add_subscriber("f", file=out, sources=["s"])
        src.ingest(b"id,v\n1,a\n2,b\n", published_at="2026-08-01", name="s.csv")

        async def inside() -> fl.Dispatched:
            asyncio.get_running_loop()  # this thread runs an event loop now
            return led.notify.dispatch(once=True)

        report = asyncio.run(inside())
        assert report.delivered > 0 and report.failed == report.dead == 0
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(lines) == report.delivered
        # and from a thread with no loop, as before
        src.ingest(b"id,v\n1,a\n2,c\n", published_at="2026-08-02", name="s2.csv")
        again = led.notify.dispatch(once=True)
        assert again.delivered > 0
    assert len(out.read_text().splitlines()) == report.delivered + again.delivered
