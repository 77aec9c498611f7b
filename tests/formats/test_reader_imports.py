"""What reading a payload loads: a CSV payload read whole (a source without a
`memory_budget`) imports neither the batched reader nor its spill, so neither Arrow
nor numpy: an ingest leaves those to the store's warm-up thread, beside the parse
(pipeline/intake/ingest.py). A module list, never a time."""

from __future__ import annotations

import json
import subprocess
import sys

_READ = """
import json, sys
from feedledger.config import make_source
from feedledger.formats import read_observations
src = make_source("s", key=["k"], format="csv", kind="snapshot"{options})
obs = read_observations(b"k,v\\n1,a\\n2,b\\n", src, label="x")
assert obs.frame.height == 2
print(json.dumps(sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("pyarrow", "numpy")
    or m in ("feedledger.formats.csv_batched", "feedledger.formats.spill")
)))
"""


def _loaded(options: str = "") -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _READ.format(options=options)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_a_whole_csv_read_loads_neither_arrow_nor_the_batched_reader() -> None:
    assert _loaded() == []


def test_a_budgeted_csv_read_loads_the_batched_reader() -> None:
    assert "feedledger.formats.csv_batched" in _loaded(', memory_budget="64MiB"')
