"""Fetch a payload over HTTP(S) with a conditional GET."""

from __future__ import annotations

import email.message
import tempfile
import time
from datetime import UTC
from email.utils import parsedate_to_datetime
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from feedledger.model.errors import BadPayloadError, ConfigError, FetchError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.sources.dated import Fetched, FetchState, date_in_name

TIMEOUT_SECONDS = 30.0  # connect, and each wait for the next bytes


def display_url(url: str) -> str:
    """The URL as configured, with any password in its user-info masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _last_segment(url: str) -> str:
    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


def _disposition_filename(value: str | None) -> str | None:
    if not value:
        return None
    message = email.message.Message()
    message["content-disposition"] = value
    name = message.get_filename()
    return name or None


def http_date(value: str, tz: str) -> int:
    """An HTTP date (RFC 9110), or failing that an ISO-8601 timestamp, as us UTC."""
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return to_us(parse_instant(value, tz, what="date header"))
    if parsed.tzinfo is None:  # "-0000": UTC by RFC 5322
        parsed = parsed.replace(tzinfo=UTC)
    return to_us(parsed.astimezone(UTC))


def _size(n: int) -> str:
    return f"{n:,} bytes"


def too_large(src: SourceConfig, shown: str, declared: int | None = None) -> BadPayloadError:
    limit = f"this source's max_payload_bytes of {_size(src.max_payload_bytes)}"
    problem = (
        f"the response declares {_size(declared)} (Content-Length), over {limit}; "
        "not downloaded, nothing archived"
        if declared is not None
        else f"the response grew past {limit}; the download was stopped, nothing archived"
    )
    return BadPayloadError(
        problem,
        source=src.name,
        payload=shown,
        hint=f"raise max_payload_bytes in [sources.{src.name}] of feedledger.toml "
        "if the publisher's files are really this large",
    )


def deadline_error(src: SourceConfig, shown: str) -> FetchError:
    return FetchError(
        f"fetching {shown} took longer than this source's fetch_deadline_s of "
        f"{src.fetch_deadline_s:g} s; given up, nothing was archived",
        source=src.name,
        hint=f"raise fetch_deadline_s in [sources.{src.name}] of feedledger.toml "
        "if the publisher is really this slow",
    )


def read_body(response: httpx.Response, src: SourceConfig, shown: str, deadline: float) -> bytes:
    """The response body, refused once it passes `max_payload_bytes` (checked against a
    declared Content-Length first, then as it arrives) or once the fetch passes its
    deadline (checked after each read; a read itself waits at most TIMEOUT_SECONDS).
    The body is spooled to a temporary file, never gathered in memory, and read back
    once complete: the peak is one chunk while it downloads, then the payload once."""
    limit = src.max_payload_bytes
    declared = response.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise too_large(src, shown, int(declared))
    received = 0
    with tempfile.TemporaryFile(prefix="feedledger-fetch-") as spool:
        # decoded bytes are counted, so a compressed response cannot slip past the limit;
        # no chunk_size: each read is seen as it arrives, so the deadline is checked
        for chunk in response.iter_bytes():
            received += len(chunk)
            if received > limit:
                raise too_large(src, shown)
            if time.monotonic() > deadline:
                raise deadline_error(src, shown)
            spool.write(chunk)
        spool.seek(0)
        return spool.read()


def fetch_http(
    src: SourceConfig,
    *,
    previous: FetchState | None = None,
    client: httpx.Client | None = None,
) -> Fetched:
    """GET `src.fetch`; Fetched(data=None) when the server answers 304 Not Modified."""
    if src.fetch is None:
        raise ConfigError("source has no fetch location", source=src.name)
    url = src.fetch
    shown = display_url(url)
    headers: dict[str, str] = {}
    if previous is not None and previous.url == url:
        if previous.etag:
            headers["If-None-Match"] = previous.etag
        if previous.last_modified:
            headers["If-Modified-Since"] = previous.last_modified

    own_client = client is None
    http = client if client is not None else httpx.Client(timeout=TIMEOUT_SECONDS)
    deadline = time.monotonic() + src.fetch_deadline_s
    # no single wait may outlast the whole fetch's deadline
    timeout = httpx.Timeout(min(TIMEOUT_SECONDS, src.fetch_deadline_s))
    try:
        with http.stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=timeout
        ) as response:
            etag = response.headers.get("etag")
            last_modified = response.headers.get("last-modified")
            content_type = response.headers.get("content-type")
            if response.status_code == 304:
                return Fetched(
                    data=None,
                    published_at=None,
                    original_name=shown,
                    content_type=content_type,
                    etag=etag or (previous.etag if previous else None),
                    last_modified=last_modified or (previous.last_modified if previous else None),
                )
            if not 200 <= response.status_code < 300:
                raise FetchError(
                    f"HTTP {response.status_code} {response.reason_phrase} from {shown}".rstrip(),
                    source=src.name,
                )
            data = read_body(response, src, shown, deadline)
    except httpx.TimeoutException as exc:
        if time.monotonic() >= deadline:
            raise deadline_error(src, shown) from exc
        raise FetchError(
            f"cannot reach {shown}: timed out ({type(exc).__name__})", source=src.name
        ) from exc
    except httpx.TooManyRedirects as exc:
        raise FetchError(f"too many redirects fetching {shown}", source=src.name) from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise ConfigError(f"invalid fetch URL {shown}: {exc}", source=src.name) from exc
    except httpx.TransportError as exc:
        reason = str(exc) or type(exc).__name__
        raise FetchError(f"cannot reach {shown}: {reason}", source=src.name) from exc
    finally:
        if own_client:
            http.close()

    published_at: int | None
    how = src.published_from
    header = how.header
    if header is not None:
        value = response.headers.get(header)
        if not value:
            raise BadPayloadError(
                f"the response has no {header} header, so its publication time is unknown",
                source=src.name,
                payload=shown,
                hint="set published_from to 'filename' or 'field:NAME'",
            )
        try:
            published_at = http_date(value, src.timezone)
        except ConfigError as exc:
            raise BadPayloadError(
                f"cannot parse the {header} header {value!r} as a date",
                source=src.name,
                payload=shown,
            ) from exc
    elif how.by_filename:
        candidates = [
            _disposition_filename(response.headers.get("content-disposition")),
            _last_segment(str(response.url)),
            _last_segment(url),
        ]
        published_at = None
        for name in candidates:
            if name:
                published_at = date_in_name(name, src.timezone)
                if published_at is not None:
                    break
        if published_at is None:
            tried = ", ".join(sorted({repr(n) for n in candidates if n})) or "none"
            raise BadPayloadError(
                f"no date in the file name (tried {tried})",
                source=src.name,
                payload=shown,
                hint="set published_from to 'header:Last-Modified' or 'field:NAME'",
            )
    else:  # field:NAME -- read from the payload by the format layer
        published_at = None

    return Fetched(
        data=data,
        published_at=published_at,
        original_name=shown,
        content_type=content_type,
        etag=etag,
        last_modified=last_modified,
    )
