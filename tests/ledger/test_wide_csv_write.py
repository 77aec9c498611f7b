"""Writing a wide CSV payload costs work linear in its columns, not quadratic: the
payload's transaction once rebuilt polars' schema of every column for each column
(`ledger/encoding/encode.encode_rows`), 11.5 s for 3 rows x 4,000 columns.

Not timed: the test counts the Python function calls (pure and built-in, every thread)
of a whole `ingest` at two widths eight times apart. Linear work makes at most about
8x the calls (a fixed part makes it fewer); the quadratic loop made ~30x here. Counts do
not depend on the machine's load. SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from helpers import Cli, write_csv

NARROW, WIDE = 250, 2000


def calls_of_ingest(cli: Cli, tmp_path: Path, width: int) -> int:
    name = f"wide{width}"
    cli("source", "add", name, "--key", "id")
    header = ["id"] + [f"c{i}" for i in range(1, width)]
    rows = [[str(r)] + [f"v{r}_{i}" for i in range(1, width)] for r in range(3)]
    path = write_csv(tmp_path / f"{name}.csv", header, rows)
    count = [0]

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        if event in ("call", "c_call"):
            count[0] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        done = cli.json("ingest", name, str(path), "--published-at", "2026-08-01")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert done["status"] == "applied" and done["changes"] == 3, done
    return count[0]


def test_a_wide_csv_costs_calls_linear_in_its_columns(cli: Cli, tmp_path: Path) -> None:
    calls_of_ingest(cli, tmp_path, 20)  # first use: imports, caches, compiled queries
    narrow = calls_of_ingest(cli, tmp_path, NARROW)
    wide = calls_of_ingest(cli, tmp_path, WIDE)
    ratio = wide / narrow
    # linear: <= 8 (WIDE / NARROW); quadratic: ~ 64 at these widths, at least 20 measured
    assert ratio < 12, f"{WIDE} columns took {ratio:.1f}x the calls of {NARROW} ({wide}/{narrow})"
    # the written versions hold every column (the work was not skipped)
    row = cli.json("asof", f"wide{WIDE}", "1", "--valid", "2026-08-01")
    assert len(row["version"]["attributes"]) == WIDE  # the key too
