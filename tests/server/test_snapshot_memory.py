"""A 1,000,000-row snapshot streamed by a real `feedledger serve` process:
every row arrives, in order, and the server's resident memory grows by at most 100 MiB
while it streams, in CSV and in JSON lines. The memory is the serving process's RSS,
sampled by psutil every 20 ms over the request, against its RSS just before. No timing
is asserted: the rate is bench/http_bench.py's.

No warm-up request before it: `feedledger serve` pays at start what a stream's first
use costs (`api.snapshot_stream.warm_up`: numba's compiled loops loaded, the writers'
libraries run once). Without that, a fresh server's first export of rows grew it once
by ~210 MiB (+105 MiB anonymous, +106 MiB file-backed code pages of polars/pyarrow)
and ~110 MiB more for numba, the same for 100k rows as for 1M (measured 2026-12-01):
the libraries' first use, not the stream's.

SQLite only: the stream's batches are the same on PostgreSQL (ledger/readers/snapshot_rows.py,
tests/pipeline/test_snapshot_batches.py runs both), and a 1M-row first load on PostgreSQL
would cost this suite ~15 s more."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import polars as pl
import psutil

import feedledger as fl
from feedledger.config import Workspace
from helpers import migrate, start_serve

ROWS = 1_000_000
GROWTH_MIB = 100  # the bound the dashboard's streaming was built to


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path / 'l.db'}", archive=None)
    migrate(ws.store_url)
    frame = pl.select(id=pl.int_range(0, ROWS)).with_columns(
        name=pl.format("name-{}", pl.col("id")), n=pl.col("id") % 97
    )
    csv = tmp_path / "big.csv"
    frame.write_csv(csv)
    with fl.open(ws.config_path) as led:
        src = led.add_source("big", key=["id"], timezone="UTC", hold_factor=1e9)
        src.ingest(csv, published_at="2026-08-01")
    return ws


def _stream(url: str, pid: int) -> tuple[int, bytes, bytes, float]:
    """(bytes read, the first line, the last line, peak RSS growth in MiB)."""
    server = psutil.Process(pid)
    base = server.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], server.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    size, first, tail = 0, b"", b""
    try:
        with httpx.stream("GET", url, timeout=600) as r:
            assert r.status_code == 200, r.read()
            for chunk in r.iter_bytes():
                if not first:
                    first = chunk.split(b"\n", 1)[0]
                size += len(chunk)
                tail = (tail + chunk)[-200:]
    finally:
        done.set()
        sampler.join()
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return size, first, last, (peak[0] - base) / 2**20


def test_a_million_row_snapshot_streams_with_bounded_server_memory(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    proc, url = start_serve(ws)
    try:
        base = f"{url}/api/sources/big/snapshot?valid=2026-08-02"
        deadline = time.monotonic() + 60
        while True:  # (the server answers once its start-up, warm-up included, is done)
            try:
                assert httpx.get(f"{url}/api/health", timeout=60).status_code == 200
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        size, first, last, growth = _stream(f"{base}&format=csv", proc.pid)
        assert first == b"id,name,n"
        assert last == f"{ROWS - 1},name-{ROWS - 1},{(ROWS - 1) % 97}".encode()
        assert size > 20 * ROWS  # every row: ~25 bytes each
        assert growth <= GROWTH_MIB, f"csv: server RSS grew {growth:.0f} MiB"
        size, first, last, growth = _stream(f"{base}&format=jsonl", proc.pid)
        assert first == b'{"id":"0","n":"0","name":"name-0"}'
        assert last.startswith(b'{"id":"%d"' % (ROWS - 1))
        assert growth <= GROWTH_MIB, f"jsonl: server RSS grew {growth:.0f} MiB"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
