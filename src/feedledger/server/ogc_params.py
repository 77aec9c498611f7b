"""The query parameters of `serve`'s OGC API - Features (OGC 17-069r4), read from the
URL's text: `bbox`, `datetime`, `limit`, `offset`, `known_at` (a vendor parameter:
transaction time), `f`, and Part 2's `bbox-crs` and `crs`, which GDAL sends once a
collection names its `storageCrs`: taken when they name the layer's own CRS (nothing
is reprojected; `coordinates`). A malformed value, or a parameter the API does not
define, is a 400 problem naming it (Requirement /req/core/query-param-invalid and
/req/core/query-param-unknown).

`datetime` is valid time, in the source's timezone when it states no offset:

* an instant (`2026-08-06T12:00:00Z`): the layer as published then (the state in
  force at that instant);
* a date (`2026-08-06`): the whole day, so the layer as published on that date (the
  state in force at the day's last instant: every publication of the day applied);
* an interval `a/b` (either end a date or an instant; `..` or nothing for an open
  end): the layer as it stood at `b` (open: now), keeping the features whose version
  in force then began at or after `a` -- what was published or changed in the
  interval and still stands at its end. `../b` is the whole layer at `b`, `a/..` the
  current layer's features changed since `a`. A deletion inside the interval is no
  feature (the layer answers what is present; `/api/.../history` has the rest).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.datastructures import QueryParams

from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import parse_instant
from feedledger.server.problems import Problem

CRS84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
DEFAULT_LIMIT = 10
MAX_LIMIT = 10_000
ITEMS = frozenset({"bbox", "bbox-crs", "crs", "datetime", "limit", "offset", "known_at", "f"})
ONE_ITEM = frozenset({"crs", "datetime", "known_at", "f"})
DOCUMENT = frozenset({"f"})
FORMATS = frozenset({"json", "geojson"})

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_OPEN = {"", ".."}


@dataclass(frozen=True, slots=True)
class When:
    """What `datetime` and `known_at` ask: the state at `valid` (None: now), the
    features whose version began at or after `since` (None: any), as known at
    `known_at` (None: the latest belief)."""

    valid: datetime | None = None
    since: datetime | None = None
    known_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Items:
    when: When
    bbox: tuple[float, float, float, float] | None
    limit: int
    offset: int


def bad(detail: str) -> Problem:
    return Problem(400, detail, kind="invalid-parameter")


def check_known(params: QueryParams, allowed: frozenset[str]) -> None:
    """400 for a parameter the API does not define here, or an `f` other than JSON."""
    unknown = sorted(set(params.keys()) - allowed)
    if unknown:
        raise bad(
            f"unknown query parameter {', '.join(unknown)}: this resource takes "
            f"{', '.join(sorted(allowed))}"
        )
    fmt = params.get("f")
    if fmt is not None and fmt.lower() not in FORMATS:
        raise bad(f"f={fmt}: the only encoding served is JSON (f=json or f=geojson)")


def when(params: QueryParams, tz: str, pinned: str | None = None) -> When:
    """`datetime` and `known_at` (see the module's text); `pinned`: the datetime of an
    `/ogc/at/{datetime}` path (then the query may not give one too)."""
    known_text = params.get("known_at")
    known = _instant(known_text, tz, "known_at") if known_text else None
    text = params.get("datetime")
    if pinned is not None:
        if text is not None:
            raise bad(f"datetime={text}: this URL is pinned at {pinned} already")
        text = pinned
    if text is None or text.strip() == "":
        return When(known_at=known)
    text = text.strip()
    if "/" not in text:
        return When(valid=_end(text, tz), known_at=known)
    start, _, end = text.partition("/")
    if start.strip() in _OPEN and end.strip() in _OPEN:
        return When(known_at=known)
    since = None if start.strip() in _OPEN else _start(start.strip(), tz)
    valid = None if end.strip() in _OPEN else _end(end.strip(), tz)
    if since is not None and valid is not None and since > valid:
        raise bad(f"datetime={text}: the interval's start is after its end")
    return When(valid=valid, since=since, known_at=known)


def items(params: QueryParams, tz: str, pinned: str | None = None) -> Items:
    check_known(params, ITEMS)
    return Items(when(params, tz, pinned), bbox(params), limit(params), offset(params))


def coordinates(params: QueryParams, layer_crs: str) -> None:
    """400 if `crs` or `bbox-crs` names a CRS other than the layer's (`layer_crs`, its
    URI): the features are served, and a bbox judged, in the layer's coordinates."""
    for name in ("crs", "bbox-crs"):
        asked = params.get(name)
        if asked is not None and asked.strip() not in (layer_crs, ""):
            raise bad(
                f"{name}={asked}: this layer is served in {layer_crs} only "
                "(its coordinates as published; nothing is reprojected)"
            )


def bbox(params: QueryParams) -> tuple[float, float, float, float] | None:
    """`bbox`: four numbers (minx,miny,maxx,maxy) or six (with a height: ignored)."""
    text = params.get("bbox")
    if text is None:
        return None
    parts = text.split(",")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise bad(f"bbox={text}: give 4 comma-separated numbers minx,miny,maxx,maxy") from None
    if len(numbers) not in (4, 6) or not all(math.isfinite(n) for n in numbers):
        raise bad(f"bbox={text}: give 4 (or 6) finite numbers minx,miny,maxx,maxy")
    if len(numbers) == 6:
        numbers = [numbers[0], numbers[1], numbers[3], numbers[4]]
    x0, y0, x1, y1 = numbers
    if y0 > y1:
        raise bad(f"bbox={text}: the lower corner's y ({y0}) is above the upper's ({y1})")
    return (x0, y0, x1, y1)


def limit(params: QueryParams) -> int:
    """`limit`: 1 or more; above MAX_LIMIT it is MAX_LIMIT (the standard's permission
    to return fewer than asked)."""
    text = params.get("limit")
    if text is None:
        return DEFAULT_LIMIT
    value = _integer(text, "limit")
    if value < 1:
        raise bad(f"limit={text}: give a whole number from 1 to {MAX_LIMIT}")
    return min(value, MAX_LIMIT)


def offset(params: QueryParams) -> int:
    text = params.get("offset")
    if text is None:
        return 0
    value = _integer(text, "offset")
    if value < 0:
        raise bad(f"offset={text}: give 0 or more")
    return value


def _integer(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise bad(f"{what}={text}: give a whole number") from None


def _instant(text: str, tz: str, what: str) -> datetime:
    try:
        return parse_instant(text, tz, what=what)
    except ConfigError as exc:
        raise bad(f"{what}={text}: {exc.problem}") from None


def _start(text: str, tz: str) -> datetime:
    """An interval's start: a date is its first instant."""
    return _instant(text, tz, "datetime")


def _end(text: str, tz: str) -> datetime:
    """An instant, or a date's last instant (the state once the day's publications are
    applied)."""
    if _DATE.fullmatch(text):
        try:
            following = datetime.fromisoformat(text) + timedelta(days=1)
        except ValueError:
            following = None
        if following is not None:
            day_after = following.date().isoformat()
            return _instant(day_after, tz, "datetime") - timedelta(microseconds=1)
    return _instant(text, tz, "datetime")
