"""The SQLite engines a process has mapped, read from its /proc/PID/maps: shared by the
single-library and concurrent-serve tests.
"""

from __future__ import annotations

import mmap

MAGIC = b"SQLite format 3\x00"


def sqlite_engines(maps: str) -> list[str]:
    """The files mapped in `maps` (the text of a /proc/PID/maps) that hold an SQLite
    engine."""
    paths = {f[5] for f in (line.split() for line in maps.splitlines()) if len(f) >= 6}
    engines = []
    for name in sorted(p for p in paths if p.startswith("/")):
        try:
            with open(name, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(MAGIC) >= 0:
                    engines.append(name)
        except (OSError, ValueError):  # gone, a device, empty
            continue
    return engines
