"""Keep a secret out of the HTTP client's log: httpx logs every request's URL (query
included) at INFO, and an ArcGIS token travels as the `token` query parameter."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, quote_plus

HTTP_LOGGERS = ("httpx",)
MASK = "***"


class _Redact(logging.Filter):
    def __init__(self, secret: str) -> None:
        super().__init__()
        forms = {secret, quote(secret, safe=""), quote_plus(secret)}
        self.forms = sorted(forms, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(form in message for form in self.forms):
            for form in self.forms:
                message = message.replace(form, MASK)
            record.msg, record.args = message, ()
        return True


@contextmanager
def redacted(secret: str | None) -> Iterator[None]:
    """While the block runs, `secret` (as stated or URL-encoded) is masked in the
    records of the HTTP client's loggers."""
    if not secret:
        yield
        return
    redact = _Redact(secret)
    loggers = [logging.getLogger(name) for name in HTTP_LOGGERS]
    for logger in loggers:
        logger.addFilter(redact)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(redact)
