"""Byte sizes as people write them (`1GiB`, `512 MiB`, `2G`, `1500000000`): parsed to
a whole number of bytes, and written back readably. Pure; no I/O."""

from __future__ import annotations

import re

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
