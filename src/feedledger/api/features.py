"""`Source.layer()`: a source read as a layer of features a page at a time -- what
`serve`'s OGC API - Features (`server/ogc.py`) answers from.

A state of the layer is the source as it stood at a valid time (`valid`: the layer as
published then; None: now) as known at a transaction time (`known_at`; None: the
latest belief). A page is chosen from that state's spatial index
(`_source/feature_index.py`: built once per state, kept in memory) by envelope
(`bbox`), by the start of the version in force (`since`: the interval form of OGC's
`datetime`) and by position (`offset`, `limit`); only the page's entities are then
read from the store (`ledger/readers/feature_rows.py`).

Honest about what was not observed (invariant 12): a valid time inside a standing gap
raises `InGap` (the gap, the last and next observation), a valid time before the
source's first observation -- or a source never observed -- `NotObserved`; neither
answers the nearest state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from feedledger.api._source import feature_index, snapshots
from feedledger.api.errors import InGap, NotObserved, gap_text
from feedledger.api.times import When, opt_dt, opt_instant_us
from feedledger.context import Context
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import from_us, iso, now_us

if TYPE_CHECKING:
    from feedledger.ledger.readers.feature_rows import FeatureRow, Token
    from feedledger.ledger.readers.snapshot_rows import PayloadLayout

Bbox = tuple[float, float, float, float]
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Feature:
    """One entity as a GeoJSON Feature: `id` the key text, `properties_text` its
    record in the source's field order (JSON, numbers as stated), `geometry_text` the
    GeoJSON geometry as stated (None: no geometry), `valid_from` when the version in
    force began (its publisher time), `crs` the layer's CRS as stated."""

    id: str
    valid_from: datetime
    properties_text: str
    geometry_text: str | None
    crs: str | None = None  # the layer's CRS as stated (`payloads.crs`)

    @property
    def properties(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.properties_text)
        return found

    @property
    def geometry(self) -> dict[str, Any] | None:
        if self.geometry_text is None:
            return None
        found: dict[str, Any] = json.loads(self.geometry_text)
        return found

    def geojson(self) -> str:
        """The Feature's GeoJSON text (the stored texts spliced, not re-encoded)."""
        return (
            '{"type":"Feature","id":'
            + json.dumps(self.id, ensure_ascii=False)
            + ',"geometry":'
            + (self.geometry_text or "null")
            + ',"properties":'
            + self.properties_text
            + "}"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.geojson())
        return out


@dataclass(frozen=True, slots=True)
class FeaturePage:
    """A page of a layer: the features, how many match in all (`matched`), where the
    page starts (`offset`) and the state it was read from (`state_from`: the publisher
    time of the payload in force, the state stands from then)."""

    source: str
    features: list[Feature]
    matched: int
    offset: int
    limit: int
    state_from: datetime | None
    crs: str | None

    @property
    def returned(self) -> int:
        return len(self.features)

    @property
    def more(self) -> bool:
        return self.offset + self.returned < self.matched


@dataclass(frozen=True, slots=True)
class LayerExtent:
    """What a collection says of itself: the envelope of the current state's
    geometries (None: none), the first and last publication applied, how many
    entities are present now, the CRS as stated and whether the source has geometry."""

    source: str
    bbox: Bbox | None
    first: datetime | None
    last: datetime | None
    count: int
    crs: str | None
    geo: bool


class Layer:
    """A source's state read as a layer of features (see the module's text)."""

    def __init__(self, context: Context, config: SourceConfig) -> None:
        self.context = context
        self.config = config
        self.name = config.name

    def __repr__(self) -> str:
        return f"Layer({self.name!r})"

    # -- what the collection says ---------------------------------------------------
    def extent(self, *, known_at: When | None = None) -> LayerExtent:
        """The current state's envelope and count, the first and last publication."""
        from feedledger.ledger import gaps  # lazy: SQLAlchemy

        known = opt_instant_us(known_at, self.config.timezone, "known_at")
        observed = gaps.observed_at(self.context.store, self.name, known)
        if not observed:
            return LayerExtent(self.name, None, None, None, 0, None, self.config.is_geo)
        token = self._token()
        layout = self._layout(now_us(), known)  # the latest state, gap or not
        for _attempt in range(5):  # the token read again: the layout stands for it
            again = self._token()
            if again == token:
                break
            token, layout = again, self._layout(now_us(), known)
        if layout is None:
            return LayerExtent(self.name, None, None, None, 0, None, self.config.is_geo)
        index = self._index(layout, known, token)
        return LayerExtent(
            self.name,
            index.extent(),
            opt_dt(observed[0]),
            opt_dt(observed[-1]),
            index.count,
            layout.crs,
            self.config.is_geo,
        )

    # -- pages and features --------------------------------------------------------
    def page(
        self,
        *,
        valid: When | None = None,
        since: When | None = None,
        known_at: When | None = None,
        bbox: Bbox | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> FeaturePage:
        """Up to `limit` features of the state at `valid` (None: now) as known at
        `known_at`, from the `offset`-th match on, in key order. `bbox` (minx, miny,
        maxx, maxy in the layer's coordinates) keeps the features whose envelope
        intersects it; `since` those whose version in force began at or after it.
        InGap / NotObserved when `valid` was not observed; ConfigError for a bad
        limit, offset or bbox."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ConfigError(f"limit {limit}: give 1 to {MAX_LIMIT}", source=self.name)
        if offset < 0:
            raise ConfigError(f"offset {offset}: give 0 or more", source=self.name)
        if bbox is not None and bbox[1] > bbox[3]:
            raise ConfigError(
                f"bbox {list(bbox)}: the lower corner's y is above the upper corner's",
                source=self.name,
            )
        tz = self.config.timezone
        known = opt_instant_us(known_at, tz, "known_at")
        valid_us = opt_instant_us(valid, tz, "valid")
        since_us = opt_instant_us(since, tz, "since")
        token = self._token()
        for _attempt in range(3):
            token, layout = self._consistent(valid_us, known, token)
            at = _state_at(layout)
            index = self._index(layout, known, token)
            matched, keys = index.select(bbox, since_us, offset, limit)
            now, rows = self._rows(keys, at, known)
            if now == token:
                break
            token = now  # a payload or a gap came in meanwhile: choose again
        order = _Order(layout.fields or [])
        features = [_feature(r, order, self.config.key, layout.crs) for r in rows]
        return FeaturePage(
            self.name, features, matched, offset, limit, opt_dt(layout.published_at), layout.crs
        )

    def feature(
        self, key: str, *, valid: When | None = None, known_at: When | None = None
    ) -> Feature:
        """The entity `key` (as the CLI takes it) as a feature of the state at `valid`
        as known at `known_at`. NotFoundError if it is not present then; InGap /
        NotObserved when `valid` was not observed."""
        from feedledger.formats.keys import key_candidates  # lazy: as the readers
        from feedledger.ledger.readers import feature_rows  # lazy: SQLAlchemy

        tz = self.config.timezone
        known = opt_instant_us(known_at, tz, "known_at")
        layout = self._observed(opt_instant_us(valid, tz, "valid"), known, self._token())
        at = _state_at(layout)
        candidates = key_candidates(self.config, key)
        _token, rows = feature_rows.read(
            self.context.store, self.name, candidates, at, known, geo=self.config.is_geo
        )
        if not rows:
            raise NotFoundError(
                f"no feature {key!r} in the layer as it stood at {iso(at)}", source=self.name
            )
        return _feature(rows[0], _Order(layout.fields or []), self.config.key, layout.crs)

    # -- internals -----------------------------------------------------------------
    def _token(self) -> Token:
        from feedledger.ledger.readers import feature_rows  # lazy: SQLAlchemy

        return feature_rows.token(self.context.store, self.name)

    def _consistent(
        self, valid_us: int | None, known: int | None, token: Token
    ) -> tuple[Token, PayloadLayout]:
        """The layout at `valid_us` and the state token it stands for: the token read
        again after the layout, and both read anew while they differ. A payload (or a
        retraction, a gap) committed between the token's read and the layout's would
        otherwise file the new state's layout, and the index built for it, under the old
        token, and the next look would build that state's index a second time."""
        for _attempt in range(5):
            layout = self._observed(valid_us, known, token)
            again = self._token()
            if again == token:
                break
            _STATES.pop((self.context.store.url, self.name, token, valid_us, known), None)
            token = again
        else:
            layout = self._observed(valid_us, known, token)
        return token, layout

    def _observed(self, valid_us: int | None, known: int | None, token: Token) -> PayloadLayout:
        """The payload in force at `valid_us` (None: now), after refusing a valid time
        that was not observed: inside a standing gap (InGap), before the first
        observation (NotObserved). Remembered per state token (`_STATES`)."""
        memo = (self.context.store.url, self.name, token, valid_us, known)
        found = _STATES.get(memo)
        if found is None:
            found = self._observe(valid_us, known)
            _STATES[memo] = found
            while len(_STATES) > MAX_STATES:
                _STATES.pop(next(iter(_STATES)))
        if isinstance(found, Exception):
            raise found
        return found

    def _observe(self, valid_us: int | None, known: int | None) -> PayloadLayout | Exception:
        at = now_us() if valid_us is None else valid_us
        inside = snapshots.snapshot_gap(self.context, self.name, at, known)
        if inside is not None:
            text = gap_text(self.name, str(iso(at)), inside)
            return InGap(text + "; no features answered", inside, source=self.name)
        layout = self._layout(at, known)
        if layout is None:
            return NotObserved(
                f"{iso(at)} is before {self.name}'s first observation: the layer was not "
                "observed then; no features answered",
                source=self.name,
            )
        return layout

    def _layout(self, at: int, known: int | None) -> PayloadLayout | None:
        from feedledger.ledger.readers import snapshot_rows  # lazy: SQLAlchemy

        return snapshot_rows.layout(self.context.store, self.name, at, known)

    def _index(
        self, layout: PayloadLayout | None, known: int | None, token: Token
    ) -> feature_index.LayerIndex:
        """The index of the state `layout` stands for (built once per state token)."""
        from feedledger.ledger.readers import snapshot_rows  # lazy: SQLAlchemy

        store = self.context.store
        at = _state_at(layout) if layout is not None else 0
        key = (store.url, self.name, token[0] or 0, at, known)
        return feature_index.CACHE.get(
            key, lambda: feature_index.build(snapshot_rows.layer_rows(store, self.name, at, known))
        )

    def _rows(self, keys: list[str], at: int, known: int | None) -> tuple[Token, list[FeatureRow]]:
        from feedledger.ledger.readers import feature_rows  # lazy: SQLAlchemy

        return feature_rows.read(
            self.context.store, self.name, keys, at, known, geo=self.config.is_geo
        )


# what `_observed` found, per (store, source, state token, valid, known); a few hundred
MAX_STATES = 256
_STATES: dict[tuple[str, str, Token, int | None, int | None], PayloadLayout | Exception] = {}


def _state_at(layout: PayloadLayout) -> int:
    """The valid time a state is read at: the publisher time of the payload in force
    (every state from then until the next payload is the same one)."""
    return layout.published_at if layout.published_at is not None else now_us()


class _Order:
    """The source's field order, and each record's fields put in it (remembered per
    set of field names: a layer's records mostly share one)."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.seen: dict[tuple[str, ...], list[str]] = {}

    def __call__(self, names: list[str]) -> list[str]:
        from feedledger.pipeline.exports.order import ordered  # lazy: as the readers

        key = tuple(names)
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = ordered(names, self.order)
        return found


def _feature(
    row: FeatureRow, order: _Order, key_fields: tuple[str, ...], crs: str | None
) -> Feature:
    from feedledger.formats.canonical import canonical, json_string  # lazy: as the readers
    from feedledger.pipeline.exports.columns import parse  # lazy: as the readers

    record = parse(row.attributes)
    props = ",".join(json_string(n) + ":" + canonical(record[n]) for n in order(list(record)))
    return Feature(
        id=feature_id(row.key, len(key_fields)),
        valid_from=from_us(row.valid_from),
        properties_text="{" + props + "}",
        geometry_text=row.geometry,
        crs=crs,
    )


def feature_id(key: str, fields: int) -> str:
    """A feature's `id` from its stored key text: for a one-field key its value (the
    stored text is a JSON array of one: `["P001"]` -> `P001`), for a compound key the
    JSON array itself (`["08","0714"]`): both what `/items/{id}` and the CLI take."""
    if fields == 1 and key.startswith("["):
        try:
            values = json.loads(key)
        except ValueError:
            return key
        if isinstance(values, list) and len(values) == 1:
            return values[0] if isinstance(values[0], str) else json.dumps(values[0])
    return key
