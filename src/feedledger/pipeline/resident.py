"""What a resident process (a scheduler) keeps warm, made visible to `health`.

A scheduler holds sources' diff states in memory (the resident tier of
ledger/statecache.py). `health` runs in another process, so the scheduler states what
it holds in a small JSON file in the workspace's local state folder, beside the state
cache it derives from: one file per process, `resident/<host>-<pid>.json`, replaced
whole after each attempt and removed when the scheduler stops. The file names its
holder (`host:pid:token:start`, as a lease does), so a file left by a process that died
on this host is recognised and not reported (`holders.holder_dead`). `health` judges
each warm state against the ledger as it stands: `current` when the store id and the
source's commit sequence are the ones it was taken at; one that is not is never used
(its next payload reloads it).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedledger.context import Context
from feedledger.ledger.runs import holders
from feedledger.ledger.statecache import WarmStates
from feedledger.model.timeutil import iso, now_us
from feedledger.pipeline.intake import allocators

FOLDER = "resident"


def folder(ctx: Context) -> Path:
    return ctx.workspace.state_dir / FOLDER


@dataclass
class ResidentReport:
    """One process's published file: `publish` after each attempt, `remove` at stop."""

    path: Path
    holder: str
    store_id: int
    _lock: threading.Lock

    @classmethod
    def open(cls, ctx: Context) -> ResidentReport:
        name = f"{socket.gethostname()}-{os.getpid()}.json"
        return cls(folder(ctx) / name, holders.new_holder(), ctx.store.store_id(), threading.Lock())

    def publish(self, warm: WarmStates) -> None:
        """Best effort: a file that cannot be written only hides what is warm."""
        body = {
            "holder": self.holder,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "store_id": self.store_id,
            "updated_at": iso(now_us()),
            # its resident set as it publishes (after an attempt, the memory freed given
            # back: pipeline/intake/allocators.py), and the most it ever held
            "rss_bytes": allocators.rss_bytes(),
            "peak_rss_bytes": allocators.peak_rss_bytes(),
            **warm.summary(),
        }
        with self._lock, contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{threading.get_ident()}")
            tmp.write_text(json.dumps(body))
            os.replace(tmp, self.path)

    def remove(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self.path.unlink()


def resident(ctx: Context) -> list[dict[str, Any]]:
    """The live resident processes of this workspace on this host and what each holds
    warm, each state marked `current` (usable as it is) or not (reloaded before use)."""
    got = []
    for path in sorted(folder(ctx).glob("*.json")) if folder(ctx).is_dir() else []:
        try:
            body = json.loads(path.read_text())
            holder = str(body["holder"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or not ours: the next look sees it
        if holders.holder_dead(holder):
            continue
        store_id = ctx.store.store_id()
        for held in body.get("sources", []):
            wm = ctx.store.watermark(str(held.get("source")))
            held["current"] = (
                body.get("store_id") == store_id
                and wm is not None
                and wm.txn_seq == held.get("commit_seq")
            )
        got.append(body)
    return got
