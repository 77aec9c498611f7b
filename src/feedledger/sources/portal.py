"""HTTP for the portal connectors (`socrata.py`, `ckan.py`): one GET with retries of
429/5xx (bounded backoff, injectable sleep), the source's size limit and whole-fetch
deadline (the plumbing of `http.py`), and JSON answers told apart from HTML pages."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from feedledger.model.errors import (
    BadPayloadError,
    ConfigError,
    FetchError,
    StaleWatermarkError,
)
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.sources.http import TIMEOUT_SECONDS, deadline_error, display_url, read_body

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_ATTEMPTS = 5  # one request and at most four retries
BACKOFF_S = 1.0  # first wait; doubles, capped at MAX_WAIT_S
MAX_WAIT_S = 60.0

Sleep = Callable[[float], None]


def default_sleep(seconds: float) -> None:
    time.sleep(seconds)


@dataclass
class Portal:
    """One connector fetch: the client, the deadline shared by all its requests, the
    sleep used between retries (tests inject one that does not sleep), and a log of the
    URLs asked."""

    src: SourceConfig
    client: httpx.Client | None = None
    sleep: Sleep | None = None
    deadline: float = 0.0
    requests: list[str] = field(default_factory=list)
    # the headers of the last answer returned by `get` (ArcGIS dates a layer by its
    # Last-Modified when its metadata has no editingInfo)
    last_headers: dict[str, str] = field(default_factory=dict)
    _own: httpx.Client | None = None

    def __enter__(self) -> Portal:
        self.deadline = time.monotonic() + self.src.fetch_deadline_s
        if self.client is None:
            self._own = httpx.Client(timeout=TIMEOUT_SECONDS)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own is not None:
            self._own.close()

    @property
    def http(self) -> httpx.Client:
        client = self.client or self._own
        assert client is not None, "use Portal as a context manager"
        return client

    def _wait(self, attempt: int, response: httpx.Response) -> tuple[float, float | None, str]:
        """The wait before the next attempt (backoff, or the server's Retry-After, at
        most MAX_WAIT_S), the wait the server asked for (None: it asked none), and that
        wait in words (`100000 s`, or `until` the HTTP date it named)."""
        wait: float = min(BACKOFF_S * 2.0 ** (attempt - 1), MAX_WAIT_S)
        after = response.headers.get("retry-after", "").strip()
        if after.isdigit():
            return min(float(after), MAX_WAIT_S), float(after), f"{float(after):g} s"
        asked = _until(after)  # Retry-After may also be an HTTP date (RFC 9110 10.2.3)
        if asked is not None:
            return min(asked, MAX_WAIT_S), asked, f"until {after}"
        return wait, None, ""

    def get(
        self, url: str, params: dict[str, str] | None = None, *, error_json: bool = False
    ) -> tuple[bytes, str]:
        """The body and content type of GET `url`; 429/5xx retried (at most
        MAX_ATTEMPTS in all, within the deadline), other non-2xx refused -- unless
        `error_json` and the answer is a JSON body (CKAN states its errors in one)."""
        shown = display_url(url)
        sleep = self.sleep or default_sleep
        timeout = httpx.Timeout(min(TIMEOUT_SECONDS, self.src.fetch_deadline_s))
        for attempt in range(1, MAX_ATTEMPTS + 1):
            self.requests.append(url)
            try:
                with self.http.stream(
                    "GET", url, params=params, follow_redirects=True, timeout=timeout
                ) as response:
                    status = response.status_code
                    content_type = response.headers.get("content-type", "")
                    if 200 <= status < 300 or (
                        error_json
                        and 400 <= status < 500
                        and status != 429
                        and "json" in content_type.lower()
                    ):
                        body = read_body(response, self.src, shown, self.deadline)
                        self.last_headers = dict(response.headers)
                        return body, content_type
                    retry = status in RETRY_STATUSES and attempt < MAX_ATTEMPTS
                    wait, asked, words = self._wait(attempt, response) if retry else (0.0, None, "")
                    reason = f"HTTP {status} {response.reason_phrase}".rstrip()
            except httpx.TimeoutException as exc:
                if time.monotonic() >= self.deadline:
                    raise deadline_error(self.src, shown) from exc
                raise FetchError(
                    f"cannot reach {shown}: timed out ({type(exc).__name__})", source=self.src.name
                ) from exc
            except httpx.TooManyRedirects as exc:
                # a redirect loop (302 to the same path): as the plain HTTP fetch says it
                raise FetchError(
                    f"too many redirects fetching {shown} (a redirect loop?); nothing was archived",
                    source=self.src.name,
                ) from exc
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise ConfigError(f"invalid URL {shown}: {exc}", source=self.src.name) from exc
            except httpx.TransportError as exc:
                reason = str(exc) or type(exc).__name__
                raise FetchError(f"cannot reach {shown}: {reason}", source=self.src.name) from exc
            if not retry:
                tried = f" after {attempt} attempts" if attempt > 1 else ""
                raise FetchError(
                    f"{reason} from {shown}{tried}; nothing was archived", source=self.src.name
                )
            left = self.deadline - time.monotonic()
            if asked is not None and asked > left:
                # the server's own wait outlasts the deadline: say so now, not "took longer"
                raise FetchError(
                    f"{reason} from {shown}: the server asked to wait {words} "
                    f"(Retry-After) before trying again, beyond what is left of this "
                    f"source's fetch_deadline_s of {self.src.fetch_deadline_s:g} s; given up "
                    f"after {attempt} attempt{'s' if attempt > 1 else ''}, nothing was archived",
                    source=self.src.name,
                    hint="run again later",
                )
            if wait > left:
                raise deadline_error(self.src, shown)
            sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def get_json(
        self, url: str, params: dict[str, str] | None = None, *, error_json: bool = False
    ) -> Any:
        """GET `url` and parse its JSON; an HTML page (a login or error page) or other
        non-JSON answer is refused in one line."""
        body, content_type = self.get(url, params, error_json=error_json)
        shown = display_url(url)
        head = body[:512].lstrip().lower()
        if "html" in content_type.lower() or head.startswith((b"<!doctype", b"<html", b"<")):
            raise BadPayloadError(
                f"the portal answered with an HTML page ({content_type or 'no content type'}) "
                "instead of JSON -- a login, maintenance or error page?",
                source=self.src.name,
                payload=shown,
                hint="open the URL in a browser; a private dataset needs a public URL",
            )
        try:
            return json.loads(body)
        except ValueError as exc:
            raise BadPayloadError(
                f"the portal's answer is not JSON: {exc}", source=self.src.name, payload=shown
            ) from exc


def _until(value: str) -> float | None:
    """The seconds from now until `value`, an HTTP date (`Wed, 21 Oct 2099 07:28:00
    GMT`); None when it is not one or is already past."""
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322
        when = when.replace(tzinfo=UTC)
    seconds = (when - datetime.now(UTC)).total_seconds()
    return round(seconds) if seconds > 0 else None


def stated(value: object) -> str:
    """A metadata value as the server wrote it in JSON (`NaN`, `1e+20`, `"yesterday"`),
    cut to a few dozen characters, for a refusal that quotes it."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def nothing_new(src: SourceConfig, what: str, published_at: int, watermark: int) -> Exception:
    """The portal's publisher date is not after the watermark: `run` reports "nothing
    new" (exit 0) and the scheduler "not yet published"; no rows were downloaded."""
    err = StaleWatermarkError(
        f"nothing new: {what} is {iso(published_at)}, not after the watermark "
        f"{iso(watermark)}; no rows were downloaded",
        source=src.name,
    )
    err.published_at = published_at  # a date gone back is looked at (pipeline/intake/observing)
    return err
