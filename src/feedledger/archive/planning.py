"""How a payload of a source is to be stored: a delta against the source's payload before
it (its `base`), unless that would make a chain of `keyframe_every` frames or the two
would not fit one zstd window; else a standalone keyframe; raw where the source keeps
its payloads raw (`keyframe_every` 0), the payload is small, or compressing saves nothing.

`plan` encodes a payload held in memory (`Objects.write`, `archive compact`);
`archive/settle.py` asks `delta_of` and encodes from the raw file a chunk at a time.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from feedledger.archive import codec


class Base(Protocol):
    """A payload as a base for the next: its bytes, its depth, its chain (itself first)."""

    @property
    def data(self) -> bytes | memoryview: ...

    @property
    def depth(self) -> int: ...

    @property
    def chain(self) -> tuple[str, ...]: ...


class Planned(NamedTuple):
    """An object as it would be stored, before its check: its stored bytes, its depth
    and base chain, and the base's bytes it is a delta of (None: a keyframe)."""

    stored: bytes
    depth: int
    chain: tuple[str, ...]
    base: bytes | memoryview | None


def delta_of(base: Base | None, sha256: str, size: int, every: int) -> Base | None:
    """`base`, if the payload `sha256` of `size` bytes is to be a delta against it (a
    source with a keyframe every `every` payloads); None for a keyframe."""
    if (
        base is not None
        and base.depth + 1 < every
        and sha256 not in base.chain
        and len(base.data) + size <= codec.MAX_DELTA_BYTES
    ):
        return base
    return None


def plan(sha256: str, data: bytes, every: int, min_size: int, base: Base | None) -> Planned | None:
    """The object of `data` (a source's payload with a keyframe every `every`, 0: kept
    raw) before its check, and the base bytes it is a delta of; None when it is to stay
    raw (small, or compression saves nothing)."""
    if every < 1 or len(data) < min_size:
        return None
    against = delta_of(base, sha256, len(data), every)
    if against is not None:
        depth = against.depth + 1
        stored = codec.encode_delta(data, sha256, against.data, against.chain[0], depth)
        planned = Planned(stored, depth, against.chain, against.data)
    else:
        planned = Planned(codec.encode_keyframe(data, sha256), 0, (), None)
    if len(planned.stored) >= len(data):
        return None
    return planned
