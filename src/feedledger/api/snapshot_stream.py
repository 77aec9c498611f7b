"""A source's snapshot as a stream of chunks (CSV, JSON lines, GeoJSON), for the HTTP
API's streamed `/snapshot`: the same bytes `Source.export_snapshot` writes to a file
(the same writers: `pipeline.exports.writers` for CSV and JSON lines, a batch of rows
at a time), produced by a writer thread into a small bounded queue
(`feedledger.ahead`), so memory stays bounded whatever the size and a reader that
stops early stops the writer.
`Source.snapshot_bytes` gives UTF-8 chunks, `Source.snapshot_chunks` the same as text."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Generator, Iterator
from typing import Any

from feedledger.ahead import Stopped, run_ahead
from feedledger.api._deprecated import deprecated
from feedledger.api.times import When
from feedledger.context import Context

CHUNK_CHARS = 256 * 1024
# rows fetched and written at a time: a long-running server keeps its growth per stream
# small. Measured on 1M rows (SQLite, load 12): RSS growth 117-119 MiB with 16k rows,
# 37 (jsonl) / 78 (csv) MiB with 4k, and faster (224k / 105k rows/s against 132k / 79k)
STREAM_BATCH_ROWS = 4096
QUEUE_CHUNKS = 4


class _QueueWriter:
    """A handle (text written is UTF-8 encoded) whose writes are gathered into chunks
    of about CHUNK_CHARS bytes and handed on by `put` (a bounded queue's: it blocks
    while the queue is full, and raises `ahead.Stopped` once the reader has gone); a
    big write is handed on in CHUNK_CHARS pieces."""

    def __init__(self, put: Callable[[bytes], None]) -> None:
        self._put = put
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: str | bytes | memoryview) -> int:
        chunk = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if self.size + len(chunk) >= CHUNK_CHARS:
            self.flush()
            for at in range(0, len(chunk) - CHUNK_CHARS + 1, CHUNK_CHARS):
                self._put(chunk[at : at + CHUNK_CHARS])
            chunk = chunk[len(chunk) - len(chunk) % CHUNK_CHARS :]
        if chunk:
            self.parts.append(chunk)
            self.size += len(chunk)
        return len(data)

    def flush(self) -> None:
        if not self.parts:
            return
        self._put(b"".join(self.parts))
        self.parts, self.size = [], 0


def decoded(chunks: Generator[bytes, None, None]) -> Iterator[str]:
    """UTF-8 chunks as text (`Source.snapshot_chunks`); closing it closes `chunks`."""
    decoder = codecs.getincrementaldecoder("utf-8")()

    def text() -> Iterator[str]:
        try:
            for chunk in chunks:
                part = decoder.decode(chunk)
                if part:
                    yield part
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail
        finally:
            chunks.close()

    return text()


def stream(
    ctx: Context,
    source: str,
    source_format: str,
    format: str,
    valid_us: int,
    known_us: int | None,
) -> Generator[bytes, None, None]:
    """`Source.snapshot_bytes` once its format is checked and its times read: the bytes
    of the export of `source` at `valid_us` (as known at `known_us`) in chunks; an error
    while streaming ends the stream early (raised from the iterator)."""
    from feedledger.pipeline.exports import snapshot as snapshot_export  # lazy: Arrow, numba
    from feedledger.pipeline.exports import writers as snapshot_writers  # lazy: Arrow, numba
    from feedledger.pipeline.exports.order import field_order, layout_at  # lazy: SQLAlchemy, Arrow

    layout = layout_at(ctx, source, valid_us, known_us)
    order = field_order(ctx, layout, source_format) if format != "jsonl" else []
    crs = layout.crs if layout is not None else None

    def produce(handle: _QueueWriter) -> None:
        if format == "geojson":
            from feedledger.pipeline.exports.geo import write_geojson  # lazy: GIS sources only

            found = snapshot_export.rows(ctx, source, valid_us, known_us)
            try:
                write_geojson(found, handle, order, crs)  # type: ignore[arg-type]
            finally:
                found.close()
            return
        got = snapshot_export.batches(
            ctx, source, valid_us, known_us, geometry=False, batch=STREAM_BATCH_ROWS, stored=True
        )
        if format == "jsonl":
            snapshot_writers.write_jsonl(got, handle)  # type: ignore[arg-type]
        else:
            snapshot_writers.write_csv(got, handle, order)  # type: ignore[arg-type]

    return _pump(produce)


def _pump(produce: Callable[[_QueueWriter], None]) -> Generator[bytes, None, None]:
    def work(put: Callable[[bytes], None]) -> None:
        handle = _QueueWriter(put)
        try:
            produce(handle)
        except Stopped:
            raise
        except BaseException:
            handle.flush()  # what was written before the error, then the error
            raise
        handle.flush()

    return run_ahead(work, depth=QUEUE_CHUNKS, name="feedledger-snapshot", join_s=5)


def warm_up() -> None:
    """Pay now, once per process, what a snapshot stream's first use costs (numba's
    compiled loops loaded, the writers' libraries run once: ~200 MiB and ~1 s in a
    fresh process; `pipeline.exports.writers.warm`). `feedledger serve` calls it at
    start, so that no request pays it and a stream's memory is the stream's own."""
    from feedledger.pipeline.exports.writers import warm  # lazy: numba, Arrow

    warm()


def snapshot_chunks(
    src: Any, *, valid: When, known_at: When | None = None, format: str = "csv"
) -> Iterator[str]:
    """Deprecated: `src.snapshot_chunks(valid=, known_at=, format=)` (`src` a `Source`;
    typed loosely so that this module does not import the one that imports it)."""
    deprecated(
        "feedledger.api.snapshot_stream.snapshot_chunks(src, ...)", "src.snapshot_chunks(...)"
    )
    found: Iterator[str] = src.snapshot_chunks(valid=valid, known_at=known_at, format=format)
    return found


def snapshot_bytes(
    src: Any, *, valid: When, known_at: When | None = None, format: str = "csv"
) -> Generator[bytes, None, None]:
    """Deprecated: `src.snapshot_bytes(valid=, known_at=, format=)`."""
    deprecated("feedledger.api.snapshot_stream.snapshot_bytes(src, ...)", "src.snapshot_bytes(...)")
    found: Generator[bytes, None, None] = src.snapshot_bytes(
        valid=valid, known_at=known_at, format=format
    )
    return found
