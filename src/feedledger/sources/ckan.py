"""The CKAN connector (API v3): `fetch = https://HOST/dataset/NAME`, `resource = NAME_OR_ID`.

`package_show?id=NAME` lists the dataset's resources; the one named (by id, else by
name) is downloaded from its `url` in its stated `format` (csv, json or jsonl: it must
be the source's format). The publisher date is the resource's `last_modified`, else the
dataset's `metadata_modified` (ISO text; without an offset it is UTC). CKAN answers
errors as `{"success": false, "error": {...}}`."""

from __future__ import annotations

from typing import Any

import httpx

from feedledger.model.connectors import CKAN_URL_RE
from feedledger.model.errors import BadPayloadError, ConfigError, FetchError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.sources.dated import Fetched
from feedledger.sources.http import display_url
from feedledger.sources.portal import Portal, Sleep, nothing_new, stated

# a resource's stated format (lower case) -> the source format that reads it
_FORMATS = {
    "csv": "csv",
    "text/csv": "csv",
    "json": "json",
    "application/json": "json",
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "json lines": "jsonl",
    "application/x-ndjson": "jsonl",
}


def _ckan_error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    kind = error.get("__type")
    rest = "; ".join(f"{k}: {v}" for k, v in error.items() if k != "__type")
    return f"{kind}: {rest}" if kind and rest else str(kind or rest or "no detail")


def _listing(resources: list[Any]) -> str:
    shown = [
        f"{r.get('name') or '(unnamed)'} (id {r.get('id')}, {r.get('format') or 'no format'})"
        for r in resources
        if isinstance(r, dict)
    ]
    return "; ".join(shown) or "none"


def _pick(src: SourceConfig, resources: list[Any]) -> dict[str, Any]:
    want = src.resource or ""
    by_id = [r for r in resources if isinstance(r, dict) and r.get("id") == want]
    found = by_id or [r for r in resources if isinstance(r, dict) and r.get("name") == want]
    if len(found) == 1:
        return found[0]
    problem = (
        f"{len(found)} resources of the dataset are named {want!r}"
        if found
        else f"the dataset has no resource named or with id {want!r}"
    )
    raise ConfigError(
        f"{problem}; its resources: {_listing(resources)}",
        source=src.name,
        hint="pass the resource's id as --resource (source add ... --replace)",
    )


def _published(src: SourceConfig, resource: dict[str, Any], result: dict[str, Any]) -> int:
    for what, value in (
        ("the resource's last_modified", resource.get("last_modified")),
        ("the dataset's metadata_modified", result.get("metadata_modified")),
    ):
        if isinstance(value, str) and value.strip():
            try:
                return to_us(parse_instant(value, "UTC", what=what))
            except ConfigError as exc:
                raise BadPayloadError(exc.problem, source=src.name) from exc
        if value is not None and value != "":  # 1e20, NaN, true: stated, but no date
            raise BadPayloadError(
                f"{what} {stated(value)} is not a date (ISO-8601 text such as "
                "2026-08-06T14:30:00); nothing was archived",
                source=src.name,
            )
    raise BadPayloadError(
        "neither the resource's last_modified nor the dataset's metadata_modified is "
        "stated, so the publication time is unknown",
        source=src.name,
    )


def fetch_ckan(
    src: SourceConfig,
    *,
    watermark: int | None = None,
    client: httpx.Client | None = None,
    sleep: Sleep | None = None,
) -> Fetched:
    """The chosen resource's bytes, dated by its last_modified (else the dataset's
    metadata_modified). When that date is not after `watermark` (us UTC),
    StaleWatermarkError before the resource is downloaded ("nothing new")."""
    url = (src.fetch or "").strip()
    match = CKAN_URL_RE.match(url)
    if match is None:  # validated with the declaration; a hand-built config may differ
        raise ConfigError("not a CKAN /dataset/NAME URL", source=src.name)
    api = f"{match['base']}/api/3/action/package_show"
    with Portal(src, client=client, sleep=sleep) as portal:
        answer = portal.get_json(api, {"id": match["name"]}, error_json=True)
        shown = display_url(f"{api}?id={match['name']}")
        if not isinstance(answer, dict) or "success" not in answer:
            raise BadPayloadError(
                "package_show's answer is not a CKAN API response (no 'success')",
                source=src.name,
                payload=shown,
            )
        if answer["success"] is not True:
            raise FetchError(
                f"CKAN refused package_show for {match['name']!r}: "
                f"{_ckan_error(answer.get('error'))}",
                source=src.name,
                payload=shown,
            )
        result = answer.get("result")
        resources = result.get("resources") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(resources, list):
            raise BadPayloadError(
                "package_show's result has no resources list", source=src.name, payload=shown
            )
        resource = _pick(src, resources)
        label = resource.get("name") or resource.get("id")
        stated = str(resource.get("format") or "").strip()
        fmt = _FORMATS.get(stated.lower())
        if fmt is None:
            raise ConfigError(
                f"resource {label!r} is in format {stated or '(none stated)'!r}, which "
                "feedledger does not read from CKAN (csv, json, jsonl)",
                source=src.name,
            )
        if fmt != src.format:
            raise ConfigError(
                f"resource {label!r} is {stated} but the source's format is {src.format}",
                source=src.name,
                hint=f"redeclare it with --format {fmt} (source add ... --replace)",
            )
        published = _published(src, resource, result)
        if watermark is not None and published <= watermark:
            raise nothing_new(src, f"resource {label!r}'s publication date", published, watermark)
        target = resource.get("url")
        if not isinstance(target, str) or not target.lower().startswith(("http://", "https://")):
            raise BadPayloadError(
                f"resource {label!r} has no http(s) url to download", source=src.name
            )
        data, content_type = portal.get(target)
    head = data[:512].lstrip().lower()
    if "html" in content_type.lower() or head.startswith((b"<!doctype html", b"<html")):
        shown_type = content_type or "no content type"
        raise BadPayloadError(
            f"the resource's url answered with an HTML page ({shown_type}) instead of "
            f"{stated} -- a login or error page? nothing was archived",
            source=src.name,
            payload=display_url(target),
        )
    return Fetched(
        data=data,
        published_at=published,
        original_name=display_url(target),
        content_type=content_type or None,
    )
