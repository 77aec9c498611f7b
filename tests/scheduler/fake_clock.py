"""A scheduler's clock the test moves by hand (`Scheduler(clock=...)`): `sleep` advances
it instead of waiting, `at` sets it to a local time of `tz`."""

from __future__ import annotations

import threading

from feedledger.model.timeutil import parse_instant, to_us


class FakeClock:
    def __init__(self, when: str, tz: str = "America/Denver") -> None:
        self.tz = tz
        self.now = to_us(parse_instant(when, tz))

    def now_us(self) -> int:
        return self.now

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        self.now += int(seconds * 1e6)

    def at(self, when: str) -> None:
        self.now = to_us(parse_instant(when, self.tz))
