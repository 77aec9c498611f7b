"""What every `Source` method stands on (api/source.py): the source's name, its
workspace `Context`, its declaration, and times typed in its timezone (a `date` is
00:00 of that day there, an aware `datetime` that instant, a naive one a wall-clock
time there)."""

from __future__ import annotations

from datetime import date, datetime

from feedledger.api.times import When, day, instant_us, opt_instant_us
from feedledger.context import Context
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import check_not_future, now_us


class SourceBase:
    """One source of the workspace `context` by name, its declaration looked up when
    needed (`config`)."""

    def __init__(self, context: Context, name: str, config: SourceConfig | None = None) -> None:
        self.context = context
        self.name = name
        self._config = config

    def __repr__(self) -> str:
        return f"Source({self.name!r})"

    @property
    def config(self) -> SourceConfig:
        """The declaration (SourceNotFound for a name the workspace does not declare)."""
        if self._config is not None:
            return self._config
        return self.context.workspace.source(self.name)

    def _us(self, value: When, what: str) -> int:
        return instant_us(value, self.config.timezone, what)

    def _opt_us(self, value: When | None, what: str) -> int | None:
        return opt_instant_us(value, self.config.timezone, what)

    def _day(self, value: When | str, what: str) -> date | str:
        """A window bound for the pipeline: text as typed (parsed there, in the source's
        timezone), a date as it is, an instant's date in the source's timezone."""
        if isinstance(value, datetime):
            return day(value, self.config.timezone, what)
        return value

    def _published(self, published_at: When | str | None, allow_future: bool) -> int | str | None:
        if published_at is None:
            return None  # from the file name or a field, as the source declares
        if isinstance(published_at, str):
            # text as typed (`--published-at`): parsed below with the payload at hand, so
            # a bad value is refused naming source and payload, the bytes kept
            return published_at
        value = self._us(published_at, "published_at")
        check_not_future(value, now_us(), what="published_at", allow_future=allow_future)
        return value
