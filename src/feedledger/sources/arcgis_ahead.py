"""An ArcGIS layer's pages asked ahead of the reader, one request at a time: the
server renders the next page while the connector reads the last (see `PagesAhead`).
`ask(offset)` fetches one page's answer (bytes, text); arcgis_query builds it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["PagesAhead"]


class PagesAhead:
    """Pages asked ahead, one request at a time on the worker thread: as soon as a
    page's answer is in, the worker itself asks for the page a full page leads to (at
    most `DEPTH` answers waiting to be read -- one once a guess was wrong -- nothing at
    or past `counted`), so the
    server renders the next page while this thread reads the last, and no request
    waits for this thread to be scheduled -- the pages follow one another as in a
    plain download of them. A guess that turns out wrong (a short page) is dropped
    with what was asked after it, and the right offset asked. At most one request is
    ever in flight; `close` cancels what is queued and waits for the one in flight."""

    DEPTH = 3

    def __init__(self, ask: Callable[[int], tuple[bytes, str]], size: int, counted: int) -> None:
        self.ask, self.size, self.counted = ask, size, counted
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arcgis-page")
        self.lock = threading.Lock()
        self.asked: deque[tuple[int, Future[tuple[bytes, str]]]] = deque()
        self.last = -1  # the offset asked last
        self.generation = 0  # bumped when the pages asked are dropped
        self.depth = self.DEPTH

    def _ask(self, offset: int) -> None:  # (under the lock)
        future = self.pool.submit(self._get, offset, self.generation)
        self.asked.append((offset, future))
        self.last = offset

    def _get(self, offset: int, generation: int) -> tuple[bytes, str]:
        answer = self.ask(offset)
        self._more(generation)
        return answer

    def _more(self, generation: int | None = None) -> None:
        with self.lock:
            if generation is not None and generation != self.generation:
                return
            if len(self.asked) < self.depth and self.last + self.size < self.counted:
                self._ask(self.last + self.size)

    def _drop(self) -> None:  # (under the lock)
        self.generation += 1
        for _offset, future in self.asked:
            future.cancel()  # the one in flight, if any, ends on its own
        self.asked.clear()

    def take(self, offset: int) -> tuple[bytes, str]:
        """The answer for `offset`: the one asked ahead if it was that, else asked now."""
        with self.lock:
            if not self.asked or self.asked[0][0] != offset:
                if self.asked:  # a wrong guess: the server's pages are short
                    self.depth = 1  # guess one page at a time from here on
                self._drop()
                self._ask(offset)
            _offset, future = self.asked.popleft()
        self._more()
        return future.result()

    def close(self) -> None:
        with self.lock:
            self._drop()
            self.last = self.counted  # nothing more is asked
        self.pool.shutdown(wait=True, cancel_futures=True)
