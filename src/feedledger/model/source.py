"""Source declarations as stored in feedledger.toml, validated with pydantic."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from feedledger.model.connectors import Connector, connector_problem

# the defaults live in model/defaults.py (no pydantic: the CLI's options state them too)
from feedledger.model.defaults import DEFAULT_FETCH_DEADLINE_S as DEFAULT_FETCH_DEADLINE_S
from feedledger.model.defaults import DEFAULT_GEOMETRY_GRID as DEFAULT_GEOMETRY_GRID
from feedledger.model.defaults import DEFAULT_MAX_PAYLOAD_BYTES as DEFAULT_MAX_PAYLOAD_BYTES
from feedledger.model.errors import ConfigError
from feedledger.model.sizes import parse_size
from feedledger.model.timeutil import zone
from feedledger.model.types import PayloadKind

# the smallest memory_budget: below it the process's own libraries are most of it
MIN_MEMORY_BUDGET = 64 * 1024**2
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PUBLISHED_FROM_RE = re.compile(r"^(filename|connector|field:[^\s]+|header:[A-Za-z0-9-]+)$")
PublishedFromKind = Literal["filename", "connector", "field", "header"]

PayloadFormat = Literal[
    "csv",
    "jsonl",
    "json",
    "parquet",
    # GIS formats (formats/spatial/gis.py; geoparquet with pyarrow): a feature's properties are
    # its record, its geometry is kept beside them (versions.geometry)
    "geojson",
    "geojsonseq",
    "shapefile",
    "gpkg",
    "filegdb",
    "flatgeobuf",
    "geoparquet",
]
GEO_FORMATS: frozenset[str] = frozenset(
    {"geojson", "geojsonseq", "shapefile", "gpkg", "filegdb", "flatgeobuf", "geoparquet"}
)
# A file name's extension -> the format it states (longest suffix first). `.zip` alone
# and `.parquet` are left to the content (a shapefile or a File Geodatabase; GeoParquet
# metadata or not).
_EXTENSIONS: tuple[tuple[str, PayloadFormat], ...] = (
    (".shp.zip", "shapefile"),
    (".gdb.zip", "filegdb"),
    (".geojsonl", "geojsonseq"),
    (".geojsons", "geojsonseq"),
    (".geojson", "geojson"),
    (".gpkg", "gpkg"),
    (".fgb", "flatgeobuf"),
    (".jsonl", "jsonl"),
    (".ndjson", "jsonl"),
    (".json", "json"),
    (".csv", "csv"),
    (".parquet", "parquet"),
)


def format_from_name(name: str) -> PayloadFormat | None:
    """The format a file name or URL path states by its extension (`.gz`/`.zip` around
    csv/jsonl/json/geojson looked through), None when it states none unambiguously."""
    lowered = name.split("?", 1)[0].split("#", 1)[0].lower().rstrip("/")
    for wrapper in (".gz", ".zip"):
        inner = lowered.removesuffix(wrapper)
        if inner != lowered and not lowered.endswith((".shp.zip", ".gdb.zip")):
            lowered = inner
            break
    for suffix, fmt in _EXTENSIONS:
        if lowered.endswith(suffix):
            return fmt
    return None


def name_problem(value: str, what: str = "source") -> str | None:
    """Why `value` cannot name a source, destination or subscriber (None: it can). One
    rule for every name that ends up in files, tables, URLs and messages."""
    if _NAME_RE.match(value):
        return None
    return (
        f"{what} name {value!r} must start with a letter or digit and use only "
        "letters, digits, '_', '.', '-' (at most 64 characters)"
    )


def check_name(value: str, what: str = "source") -> str:
    """`value` if it is a valid name (see `name_problem`), else a ConfigError (exit 2)."""
    problem = name_problem(value, what)
    if problem is not None:
        raise ConfigError(problem)
    return value


@dataclass(frozen=True, slots=True)
class PublishedFrom:
    """Where a source's publisher date comes from, parsed once from its declaration:
    the payload's file name (`filename`), a field every record states (`field:NAME`), an
    HTTP response header (`header:Last-Modified`), or a portal connector's own date
    (`connector`: the layer's edit date, the view's rowsUpdatedAt, the resource's
    last_modified). `str()` gives the declaration back exactly as written
    (feedledger.toml, `source list --json`)."""

    kind: PublishedFromKind
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> PublishedFrom:
        """The value `text` declares; a ValueError naming the accepted forms if none."""
        if not _PUBLISHED_FROM_RE.match(text):
            raise ValueError(
                f"published_from {text!r} must be 'filename', 'field:NAME', "
                "'header:Last-Modified' or (a --connector source) 'connector'"
            )
        if text in ("filename", "connector"):
            return cls("filename" if text == "filename" else "connector")
        kind, name = text.split(":", 1)
        return cls("field" if kind == "field" else "header", name)

    @property
    def by_filename(self) -> bool:
        return self.kind == "filename"

    @property
    def field(self) -> str | None:
        """The payload field stating the publisher date (`field:NAME`), else None."""
        return self.name if self.kind == "field" else None

    @property
    def header(self) -> str | None:
        """The HTTP response header carrying the publisher date (`header:X`), else None."""
        return self.name if self.kind == "header" else None

    def __str__(self) -> str:
        return self.kind if self.name is None else f"{self.kind}:{self.name}"


def validate_cadence(value: str) -> str:
    """`daily`, `weekdays`, or a 5-field cron expression (croniter)."""
    if value in ("daily", "weekdays"):
        return value
    from croniter import croniter  # lazy: croniter only for cron cadences

    if not croniter.is_valid(value) or len(value.split()) != 5:
        raise ValueError(
            f"cadence {value!r} is neither 'daily', 'weekdays' nor a 5-field cron "
            "expression such as '0 6 * * 1-5'"
        )
    return value


class SourceConfig(BaseModel):
    """One feed. `key` fields identify an entity; compound keys compare field by field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    key: tuple[str, ...] = Field(min_length=1)
    format: PayloadFormat = "csv"
    kind: PayloadKind = PayloadKind.SNAPSHOT
    timezone: str = "UTC"
    cadence: str = "daily"
    revision: str | None = None
    fetch: str | None = None
    published_from: PublishedFrom = PublishedFrom("filename")
    mass_delete_threshold: float = Field(default=0.5, gt=0.0, le=1.0)
    # A live run is held for review (its notifications not sent) when its change count
    # exceeds hold_factor x the median of the source's last 30 runs AND hold_min_changes.
    hold_factor: float = Field(default=10.0, gt=1.0)
    hold_min_changes: int = Field(default=100, ge=0)
    # The scheduler. A publication of date D is due at `publish_at` (local time, HH:MM)
    # on D -- for a cron cadence, at its first firing that day. The scheduler tries for
    # it from then, retrying with backoff from `retry_s` (doubling, up to an hour) while
    # the publisher is late or unreachable, for at most `fetch_window_h` hours (default:
    # until the next publication is due). A source is stale when more than
    # `stale_after` expected publications are missing. Missed publications are
    # recovered by a backfill (`recovery = "auto"`) or announced and left to an
    # operator (`"hold"`).
    publish_at: str = "00:00"
    fetch_window_h: float | None = Field(default=None, gt=0)
    retry_s: float = Field(default=300.0, gt=0)
    stale_after: int = Field(default=1, ge=0)
    recovery: Literal["auto", "hold"] = "auto"
    max_payload_bytes: int = Field(default=DEFAULT_MAX_PAYLOAD_BYTES, gt=0)
    fetch_deadline_s: float = Field(default=DEFAULT_FETCH_DEADLINE_S, gt=0)
    # a portal connector (None: `fetch` is a directory, file or plain URL); `resource`
    # picks a CKAN dataset's file, `page_size` is Socrata's rows per request
    connector: Connector | None = None
    resource: str | None = None
    page_size: int | None = Field(default=None, gt=0)
    # CSV dialect: the field separator (one character; `tab` or `\t` for a tab) and the
    # text encoding of csv/jsonl/json payloads (decoded to UTF-8 before they are read).
    csv_delimiter: str = ","
    encoding: str = "utf-8"
    # GIS: the layer to read from a file holding several (`--layer`), and the grid
    # geometry coordinates are snapped to before two geometries are compared
    layer: str | None = None
    geometry_grid: float = Field(default=DEFAULT_GEOMETRY_GRID, gt=0)
    # the environment variable holding a secured ArcGIS service's token (never the
    # token itself: feedledger.toml is not a place for secrets)
    token_env: str | None = None
    # The memory one payload's diff may use, in bytes (`1GiB` accepted): a payload whose
    # diff would need more is read, diffed and written in key-hash partitions
    # (pipeline/intake/bounded.py). None: the whole payload at once (fastest), unless it is
    # large enough for the default bound (sizes.within_default: 1 GiB from 256 MiB).
    memory_budget: int | None = None

    @property
    def is_geo(self) -> bool:
        """True for a GIS format: records are features with a geometry."""
        return self.format in GEO_FORMATS

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(v.strip() for v in value)
        if any(not v for v in cleaned):
            raise ValueError("key fields must be non-empty names")
        if len(set(cleaned)) != len(cleaned):
            raise ValueError(f"key fields repeat: {list(cleaned)}")
        return cleaned

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        try:
            zone(value)
        except ConfigError as exc:
            raise ValueError(exc.problem) from None
        return value

    @field_validator("cadence")
    @classmethod
    def _cadence(cls, value: str) -> str:
        return validate_cadence(value)

    @field_validator("publish_at")
    @classmethod
    def _publish_at(cls, value: str) -> str:
        match = re.fullmatch(r"([01]\d|2[0-3]):([0-5]\d)", value.strip())
        if match is None:
            raise ValueError(f"publish_at {value!r} must be a local time HH:MM, such as 06:30")
        return value.strip()

    @field_validator("published_from", mode="plain")
    @classmethod
    def _published_from(cls, value: object) -> PublishedFrom:
        if isinstance(value, PublishedFrom):
            return value
        if not isinstance(value, str):
            raise ValueError("Input should be a valid string")
        return PublishedFrom.parse(value)

    @field_serializer("published_from")
    def _published_from_text(self, value: PublishedFrom) -> str:
        return str(value)

    @field_validator("fetch")
    @classmethod
    def _fetch(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("fetch location is empty")
        return value

    @model_validator(mode="before")
    @classmethod
    def _connector_date(cls, values: Any) -> Any:
        """A connector source is dated by its portal (`connector`) unless it names a
        field: an absent or `filename` declaration (what `source add` wrote before
        there was `connector`; a connector has no file name) reads as `connector`."""
        if isinstance(values, dict) and values.get("connector") is not None:
            stated = values.get("published_from")
            if stated is None or str(stated) == "filename":
                values = {**values, "published_from": "connector"}
        elif isinstance(values, dict) and values.get("published_from", "x") is None:
            values = {k: v for k, v in values.items() if k != "published_from"}
        return values

    @model_validator(mode="after")
    def _connector(self) -> SourceConfig:
        problem = connector_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("memory_budget", mode="before")
    @classmethod
    def _memory_budget(cls, value: object) -> int | None:
        if value is None:
            return None
        size = parse_size(value)
        if size < MIN_MEMORY_BUDGET:
            raise ValueError(f"{value!r} is below the smallest memory budget, 64MiB")
        return size

    @field_validator("csv_delimiter")
    @classmethod
    def _csv_delimiter(cls, value: str) -> str:
        return parse_csv_delimiter(value)

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, value: str) -> str:
        return check_encoding(value)


_DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def parse_csv_delimiter(value: str) -> str:
    """The one-character CSV field separator `value` names (`tab` or `\\t` for a tab);
    a ValueError saying what is accepted otherwise."""
    char = _DELIMITER_NAMES.get(value.lower() if len(value) > 1 else value, value)
    if len(char) != 1 or not char.isascii() or char in ('"', "\n", "\r") or char.isalnum():
        raise ValueError(
            f"{value!r} must be one ASCII character other than a quote, a line break, a "
            "letter or a digit (such as ';' or '|'), or 'tab' / '\\t' for a tab"
        )
    return char


def check_encoding(value: str) -> str:
    """`value` if Python knows it as a text encoding (utf-8, latin-1, cp1252, utf-16...);
    a ValueError otherwise."""
    try:
        info = codecs.lookup(value)
    except LookupError:
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ValueError(
            f"{value!r} is not a known text encoding (such as utf-8, latin-1, cp1252, utf-16)"
        )
    return value
