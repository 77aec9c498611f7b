"""examples/dagster/definitions.py is accepted by `dagster definitions validate` (run
as a subprocess, as a deployment would load it), over a workspace with a source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import feedledger as fl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dagster" / "definitions.py"
DEADLINE_S = 600  # a hang guard on a loaded machine, not a timing


def test_the_example_definitions_validate(tmp_path: Path) -> None:
    (tmp_path / "feed").mkdir()
    with fl.init(tmp_path / "ws") as led:
        led.add_source("larimer", key=["parcel_id"], fetch=str(tmp_path / "feed"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "FEEDLEDGER_WORKSPACE": str(tmp_path / "ws"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-f", str(EXAMPLE)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All code locations passed validation" in done.stdout + done.stderr
