"""The Socrata connector (SODA 2.x): `fetch = https://HOST/resource/abcd-1234.json`.

The publisher date is the view's `rowsUpdatedAt` (epoch seconds) from
`/api/views/abcd-1234.json`, read before and after paging the rows with
`$limit`/`$offset` ordered by `:id` (a short page ends it). A dataset republished while
it was paged is downloaded again once; republished again, the fetch fails and nothing
is archived. The payload is one JSON array of every row (the `json` format reads it)."""

from __future__ import annotations

import json

import httpx

from feedledger.model.connectors import DEFAULT_PAGE_SIZE, SOCRATA_URL_RE
from feedledger.model.errors import BadPayloadError, FetchError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import epoch_us, iso
from feedledger.sources.dated import Fetched
from feedledger.sources.http import display_url, too_large
from feedledger.sources.portal import Portal, Sleep, nothing_new, stated


def _rows_updated(portal: Portal, views_url: str) -> int:
    """The view's rowsUpdatedAt, as us UTC."""
    meta = portal.get_json(views_url)
    value = meta.get("rowsUpdatedAt") if isinstance(meta, dict) else None
    if value is None:
        raise BadPayloadError(
            "the view's metadata has no rowsUpdatedAt (epoch seconds), so the dataset's "
            "publication time is unknown",
            source=portal.src.name,
            payload=display_url(views_url),
        )
    us = epoch_us(value, 1_000_000)
    if us is None:  # NaN, 1e20, "yesterday"...: stated, but no instant at all
        raise BadPayloadError(
            f"the view's rowsUpdatedAt {stated(value)} is not a date (epoch seconds between the "
            "years 1 and 9999); nothing was archived",
            source=portal.src.name,
            payload=display_url(views_url),
        )
    return us


def _page_error(src: SourceConfig, shown: str, page: object) -> FetchError | BadPayloadError:
    if isinstance(page, dict) and page.get("error"):
        message = page.get("message") or page.get("code") or "an error"
        return FetchError(f"Socrata answered {message!r} for {shown}", source=src.name)
    return BadPayloadError(
        f"a page of rows is not a JSON array but {type(page).__name__}",
        source=src.name,
        payload=shown,
    )


def _all_rows(portal: Portal, url: str) -> list[object]:
    src = portal.src
    size = src.page_size or DEFAULT_PAGE_SIZE
    rows: list[object] = []
    offset = 0
    received = 0
    while True:
        params = {"$limit": str(size), "$offset": str(offset), "$order": ":id"}
        body, _type = portal.get(url, params)
        received += len(body)
        if received > src.max_payload_bytes:
            raise too_large(src, display_url(url))
        page = _parse_page(portal, url, body)
        rows.extend(page)
        if len(page) < size:
            return rows
        offset += size


def _parse_page(portal: Portal, url: str, body: bytes) -> list[object]:
    shown = display_url(url)
    if body[:512].lstrip().startswith(b"<"):
        raise BadPayloadError(
            "the portal answered with an HTML page instead of JSON rows -- a login, "
            "maintenance or error page?",
            source=portal.src.name,
            payload=shown,
        )
    try:
        page = json.loads(body)
    except ValueError as exc:
        raise BadPayloadError(
            f"a page of rows is not JSON: {exc}", source=portal.src.name, payload=shown
        ) from exc
    if not isinstance(page, list):
        raise _page_error(portal.src, shown, page)
    return page


def fetch_socrata(
    src: SourceConfig,
    *,
    watermark: int | None = None,
    client: httpx.Client | None = None,
    sleep: Sleep | None = None,
) -> Fetched:
    """Every row of the dataset as one JSON array, dated by its rowsUpdatedAt. When
    that date is not after `watermark` (us UTC), StaleWatermarkError before any row is
    asked for ("nothing new")."""
    url = (src.fetch or "").strip()
    match = SOCRATA_URL_RE.match(url)
    if match is None:  # validated with the declaration; a hand-built config may differ
        raise BadPayloadError("not a Socrata /resource/<4x4>.json URL", source=src.name)
    views_url = f"{match['base']}/api/views/{match['id']}.json"
    with Portal(src, client=client, sleep=sleep) as portal:
        for attempt in (1, 2):
            before = _rows_updated(portal, views_url)
            if watermark is not None and before <= watermark:
                raise nothing_new(src, "the dataset's rowsUpdatedAt", before, watermark)
            rows = _all_rows(portal, url)
            after = _rows_updated(portal, views_url)
            if after == before:
                break
            if attempt == 2:
                raise FetchError(
                    f"the dataset was republished while it was downloaded, twice "
                    f"(rowsUpdatedAt {iso(before)} then {iso(after)}); the rows were "
                    "discarded and nothing was archived",
                    source=src.name,
                    payload=display_url(url),
                    hint="run again once the publisher has finished updating it",
                )
    data = json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Fetched(
        data=data,
        published_at=before,
        original_name=display_url(url),
        content_type="application/json",
    )
