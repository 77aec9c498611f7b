"""A process held at a fault point (`FEEDLEDGER_FAULT=<point>[:<n>]:pause`,
src/feedledger/faults.py) until the test lets it go: the test learns from the file the
pause writes exactly which process and which PostgreSQL backend are held there, acts on
them, then resumes it. No guess from `pg_stat_activity` (another batch's connection may
look the same for a moment) and no timed pause (a loaded machine outlasts any)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from feedledger.faults import ENV, PAUSED_ENV, RESUME_ENV

# only detects a hang: the process is held until `resume()` (or this long)
HOLD_S = 600


class FaultPause:
    """`env()` for the child process; `wait(proc)` until it is held; `resume()`."""

    def __init__(self, folder: Path, point: str) -> None:
        self.point = point
        self.paused = folder / "fault-paused.json"
        self.resumed = folder / "fault-resume"

    def env(self) -> dict[str, str]:
        return {
            ENV: f"{self.point}:pause",
            "FEEDLEDGER_FAULT_PAUSE_S": str(HOLD_S),
            PAUSED_ENV: str(self.paused),
            RESUME_ENV: str(self.resumed),
        }

    def wait(self, proc: subprocess.Popen[str], deadline_s: float = 300) -> dict[str, Any]:
        """What the held process published (`point`, `count`, `pid`, `backend_pid`), once
        it is held; fails (with its output) if it ends first or hangs."""
        deadline = time.monotonic() + deadline_s  # only detects a hang
        while not self.paused.exists():
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"ended ({proc.returncode}) before {self.point}: {err}{out}")
            if time.monotonic() > deadline:
                raise AssertionError(f"never reached {self.point}")
            time.sleep(0.02)
        info: dict[str, Any] = json.loads(self.paused.read_text(encoding="utf-8"))
        assert info["pid"] == proc.pid, info
        return info

    def resume(self) -> None:
        self.resumed.touch()
