"""The environment failing under a write: a full disk, a read-only file system, no
permission, a failing device. Recognised along an exception's chain (OS errors by errno,
database drivers by their messages), so that every layer can turn one into a single
line naming the path and the fix instead of a traceback or a misleading hint."""

from __future__ import annotations

import errno
from dataclasses import dataclass

# Driver messages (SQLite, its ADBC driver, PostgreSQL) for the same conditions.
_MESSAGES = (
    ("database or disk is full", "full"),
    ("no space left on device", "full"),
    ("disk quota exceeded", "full"),
    ("attempt to write a readonly database", "read-only"),
    ("read-only file system", "read-only"),
    ("disk i/o error", "io"),
)
_ERRNOS = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EROFS: "read-only",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
    errno.EIO: "io",
    errno.ENOTDIR: "not-a-folder",
}
_CAUSES = {
    "full": "the disk is full",
    "read-only": "the file system is read-only",
    "permission": "permission denied",
    "io": "the device reports an I/O error",
    "not-a-folder": "a file stands where a folder is needed",
}


@dataclass(frozen=True)
class EnvFailure:
    kind: str  # full | read-only | permission | io | not-a-folder
    detail: str  # the underlying message, first line

    @property
    def cause(self) -> str:
        return _CAUSES[self.kind]

    def fix(self, path: str) -> str:
        """What the operator should do about `path`; nothing was applied meanwhile."""
        if self.kind == "full":
            return f"free space on the disk holding {path}, then run the command again"
        if self.kind == "read-only":
            return f"mount {path} read-write, or point feedledger.toml at a writable place"
        if self.kind == "permission":
            return f"give this user write access to {path}"
        if self.kind == "not-a-folder":
            return f"{path} must be a folder: move the file away or fix the path"
        return f"check the device holding {path}, then run the command again"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def env_failure(exc: BaseException) -> EnvFailure | None:
    """The environment failure behind `exc` (itself, its cause or context, a
    SQLAlchemy error's `orig`), or None if it is something else."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.errno in _ERRNOS:
            return EnvFailure(_ERRNOS[item.errno], item.strerror or _first_line(item))
        text = str(item).lower()
        for needle, kind in _MESSAGES:
            if needle in text:
                return EnvFailure(kind, needle)
        orig = getattr(item, "orig", None)
        todo.extend([orig if isinstance(orig, BaseException) else None])
        todo.extend([item.__cause__, item.__context__])
    return None


def failing_path(exc: BaseException, default: str) -> str:
    """The path an OS error names (its `filename`), else `default`."""
    seen: set[int] = set()
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        seen.add(id(item))
        if isinstance(item, OSError) and item.filename:
            return str(item.filename)
        item = item.__cause__ or item.__context__
    return default
