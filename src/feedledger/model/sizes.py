"""Byte sizes as people write them (`1GiB`, `512 MiB`, `2G`, `1500000000`): parsed to
a whole number of bytes, and written back readably; and the default memory bound of a
source declared without a `memory_budget` (pipeline/intake/bounded.py): the budget it gets for a
payload too large for the whole path, and the payload size from which it gets it, each
changed by an environment variable. No I/O beyond reading the environment."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from feedledger.model.errors import ConfigError

if TYPE_CHECKING:
    from feedledger.model.source import SourceConfig

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(value: object) -> int:
    """Bytes from an int or a text such as `1GiB`, `512MiB`, `1.5G` (k/M/G/T alone are
    binary, KB/MB/GB decimal); a ValueError saying what is accepted otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(value) if isinstance(value, str) else None
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(
            f"{value!r} is not a size: a number of bytes or one with a unit, such as "
            "1GiB, 512MiB or 2GB"
        )
    return int(float(match.group(1)) * unit)


def format_size(n: int) -> str:
    """`n` bytes in the largest binary unit that keeps it readable (`1 GiB`, `1.5 GiB`)."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} B"


GiB = 1024**3
# The budget of a source without one, for a payload too large for the whole path...
DEFAULT_MEMORY_BUDGET = 1 * GiB
# ...which is one of at least this many bytes (as fetched): a quarter of that budget (the
# whole read and apply peak at six to eight times the payload: below it, under ~2 GiB)
DEFAULT_BOUND_FROM = DEFAULT_MEMORY_BUDGET // 4
BUDGET_ENV = "FEEDLEDGER_MEMORY_BUDGET"
BOUND_FROM_ENV = "FEEDLEDGER_MEMORY_BUDGET_FROM"


def default_budget() -> int | None:
    """The budget of a source declared without one, when its payload or state needs one
    (None: `FEEDLEDGER_MEMORY_BUDGET=none`, never bounded by default)."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY_BUDGET
    if text.lower() == "none":
        return None
    return _env_size(BUDGET_ENV, text)


def bound_from() -> int:
    """The payload size (bytes, as fetched) from which a source without a budget is
    ingested within `default_budget()`."""
    text = os.environ.get(BOUND_FROM_ENV, "").strip()
    return _env_size(BOUND_FROM_ENV, text) if text else DEFAULT_BOUND_FROM


def _env_size(name: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def within_default(src: SourceConfig, size: int) -> SourceConfig:
    """`src` as a payload of `size` bytes is ingested: with `default_budget()` as its
    `memory_budget` when it has none and the payload is `bound_from()` bytes or more
    (the same declaration otherwise); its own budget, if any, always. A bad environment
    value: ConfigError, whatever the payload."""
    budget, start = default_budget(), bound_from()
    if src.memory_budget is not None or budget is None or size < start:
        return src
    return src.model_copy(update={"memory_budget": budget})
