"""Destinations for the sync tests (any kind opened on a fresh place, a Doc, what it
holds for a key) and the `suppliers` source they are fed from: shared by the guard,
destination-command and deletion-order tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from feedledger.model.destination import Destination, generation_rank
from feedledger.sync.kinds import DestinationKind, open_target
from feedledger.sync.transform import Doc, content_hash
from helpers import Cli, write_csv

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"
SRC = "suppliers"


def target(place: tuple[str, str, str]) -> DestinationKind:
    """The destination at `place` (any kind: sync/kinds), opened and ensured."""
    kind, url, table = place
    t = open_target(Destination("d", SRC, kind, url, table, ("name",)))  # type: ignore[arg-type]
    t.ensure()
    return t


def doc(key: str, rev: int, body: dict[str, Any] | None, gen: str = "M-3") -> Doc:
    text_ = None if body is None else json.dumps(body, sort_keys=True, separators=(",", ":"))
    k = json.dumps([key])
    return Doc(k, rev, gen, generation_rank(gen), content_hash(text_), body is None, text_)


def held(t: DestinationKind, key: str) -> tuple[int, str, bool] | None:
    rows = {r[0]: r for r in t.rows()}
    r = rows.get(json.dumps([key]))
    return None if r is None else (int(r[1]), r[2], bool(r[4]))


def supplier_day(cli: Cli, tmp_path: Path, day: str, rows: list[list[str]]) -> None:
    path = write_csv(tmp_path / f"{SRC}_{day}.csv", ["id", "rev", "name"], rows)
    cli("ingest", SRC, str(path))


def declare(cli: Cli, place: tuple[str, str, str], *extra: str) -> None:
    kind, url, table = place
    where = {"gpkg": ("--layer", table), "tantivy": ()}.get(kind, ("--table", table))
    cli("destination", "add", "search", "--source", SRC, f"--{kind}", url, *where,
        *(() if kind == "gpkg" else ("--text-fields", "name")), *extra)  # fmt: skip


def base(n: int = 30) -> list[list[str]]:
    return [[f"V-{i}", "1", f"supplier {i}"] for i in range(n)]
