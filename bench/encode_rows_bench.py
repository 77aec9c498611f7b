"""CPU of `encode_rows` (a CSV payload's stored attribute texts, ledger/encoding/encode.py)
over a whole payload, 50k rows a chunk as a first load encodes them.

    PYTHONPATH=SRC .venv/bin/python bench/encode_rows_bench.py --data /work/data/n1m --rounds 3

The codebook is planned as an ingest plans it (a spread sample of the canonical texts).
Prints each round's process CPU (user + system, Polars' threads included) and wall
seconds, and a digest of the texts (equal across trees that encode alike). Compare two
trees by running it under each PYTHONPATH, alternating."""

from __future__ import annotations

import argparse
import hashlib
import resource
import time
from pathlib import Path

import polars as pl

from feedledger.formats.canonical import object_texts
from feedledger.ledger.encoding import encode_rows, spread
from feedledger.ledger.encoding.codec import plan_book

CHUNK = 50_000


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a gen_parcels.py folder")
    parser.add_argument("--day", default="2026-08-01")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = pl.read_csv(args.data / f"parcels_{args.day}.csv", infer_schema=False)
    sample = object_texts(rows[spread(pl.Series(range(rows.height)))], list(rows.columns))
    book = plan_book(sample.to_list())
    for n in range(1, args.rounds + 1):
        digest = hashlib.sha256()
        cpu = wall = 0.0
        for start in range(0, rows.height, CHUNK):
            chunk = rows.slice(start, CHUNK)
            cpu0, wall0 = _cpu(), time.perf_counter()
            texts = encode_rows(book, chunk)
            cpu, wall = cpu + _cpu() - cpu0, wall + time.perf_counter() - wall0
            digest.update("\n".join(texts.to_list()).encode())  # (not timed)
        print(
            f"round={n} rows={rows.height} cpu={cpu:.3f} wall={wall:.3f} "
            f"sha256={digest.hexdigest()[:16]}"
        )


if __name__ == "__main__":
    main()
