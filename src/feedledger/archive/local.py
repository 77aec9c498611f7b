"""Content-addressed, write-once payload store on a local (or mounted) file system.

Layout under `root`::

    objects/<sha[:2]>/<sha>                                   payload bytes, read-only
    meta/<source>/<published_at_us:020d>-<payload_id>.json     accepted sidecars
    rejected/<source>/<published_at_us:020d>-<payload_id>.json refused (ambiguous) sidecars
    rejected/<source>/<sha[:16]>-<reason hash>.json           notes on unusable bytes
    rejected/_unfiled/<sha[:16]>-<reason hash>.json           ... whose source is unknown
    meta/<source>/.lock                                        per-source put lock

Every file is written to a temporary file in its final directory, fsync'd, then
hard-linked into place only if absent (never overwritten) and the directory fsync'd.
Several processes may use one archive at once: object creation is atomic
(`os.link` fails if the name exists) and the sidecar check-and-create for a source
is serialised by an advisory lock on `meta/<source>/.lock`.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import secrets
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from feedledger.archive import rejected as _rejected
from feedledger.archive.sidecar import (
    SHA_RE as _SHA_RE,
)
from feedledger.archive.sidecar import (
    SIDECAR_RE as _SIDECAR_RE,
)
from feedledger.archive.sidecar import (
    ambiguous as _ambiguous,
)
from feedledger.archive.sidecar import (
    check_source as _check_source,
)
from feedledger.archive.sidecar import new_ref
from feedledger.archive.sidecar import (
    parse_sidecar as _parse_sidecar,
)
from feedledger.archive.sidecar import (
    sidecar_bytes as _sidecar_bytes,
)
from feedledger.archive.sidecar import (
    sidecar_name as _sidecar_name,
)
from feedledger.model.envfail import env_failure, failing_path
from feedledger.model.errors import (
    ArchiveUnavailableError,
    FeedledgerError,
    NotFoundError,
)
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import now_us

_READ_CHUNK = 1 << 20

if sys.platform == "win32":  # pragma: no cover - no advisory locks; os.link still guards

    def _lock_exclusive(fd: int) -> None:
        return None

else:
    import fcntl

    def _lock_exclusive(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalArchive:
    """Write-once, content-addressed payload store in a directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalArchive({str(self.root)!r})"

    @property
    def location(self) -> str:
        """Where the archive lives, for messages: its folder."""
        return str(self.root)

    def prepare(self) -> None:
        """Create the archive folder (`feedledger init`)."""
        with self._writing():
            self._ensure_dir(self.root)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A full disk, a read-only file system, no permission... under a write: one
        clear error naming the path and the fix (nothing reached the ledger yet)."""
        try:
            yield
        except OSError as exc:
            failure = env_failure(exc)
            if failure is None:
                raise
            path = failing_path(exc, str(self.root))
            raise ArchiveUnavailableError(
                f"cannot write the archive at {path}: {failure.cause} ({failure.detail})",
                hint=f"{failure.fix(path)}; the ledger is unchanged",
            ) from exc

    # -- paths -------------------------------------------------------------------------

    def path_of(self, sha256: str) -> Path:
        """Where the object with this sha256 lives (whether or not it exists)."""
        if not _SHA_RE.match(sha256):
            raise NotFoundError(f"{sha256!r} is not a sha256 hex digest (64 lowercase hex digits)")
        return self.root / "objects" / sha256[:2] / sha256

    def _meta_dir(self, source: str) -> Path:
        return self.root / "meta" / source

    def _rejected_dir(self, source: str) -> Path:
        return self.root / "rejected" / source

    # -- writing -----------------------------------------------------------------------

    def put(
        self,
        source: str,
        data: bytes,
        *,
        published_at: int,
        fetched_at: int,
        original_name: str | None = None,
        content_type: str | None = None,
        sha256: str | None = None,
    ) -> tuple[PayloadRef, bool]:
        """Archive `data` for `source`; returns (ref, created). `sha256` may be given when
        the caller already stored the bytes with `put_object` (it is trusted).

        `created` is False when this exact publication (source, published_at, bytes)
        is already archived; the existing ref (with its original `fetched_at`) is
        returned. Different bytes claiming the same publisher timestamp are kept under
        `rejected/` for inspection and refused with AmbiguousPayloadError.
        """
        ref = new_ref(
            source,
            data,
            published_at=published_at,
            fetched_at=fetched_at,
            original_name=original_name,
            content_type=content_type,
            sha256=sha256,
        )
        with self._writing():
            return self._put(ref, data)

    def _put(self, ref: PayloadRef, data: bytes) -> tuple[PayloadRef, bool]:
        source, published_at = ref.source, ref.published_at
        sha, payload_id = ref.sha256, ref.payload_id
        # Archive first: the bytes are durable before any sidecar names them.
        self._write_object(sha, data)

        name = _sidecar_name(published_at, payload_id)
        meta_dir = self._meta_dir(source)
        self._ensure_dir(meta_dir)
        with self._source_lock(meta_dir):
            accepted = meta_dir / name
            if accepted.exists():
                return self._existing(accepted, source), False
            rivals = sorted(
                p for p in meta_dir.glob(f"{published_at:020d}-*.json") if p.name != name
            )
            if rivals:
                rejected = self._rejected_dir(source) / name
                self._ensure_dir(rejected.parent)
                self._write_once(rejected, self._encode(ref))
                raise _ambiguous(ref, [p.name[21:-5] for p in rivals], str(rejected))
            if not self._write_once(accepted, self._encode(ref)):
                # Only possible without advisory locks: another process won the race.
                return self._existing(accepted, source), False
        return ref, True

    def put_object(self, data: bytes) -> str:
        """Store the bytes alone (content-addressed, fsynced); returns their sha256.
        Naming them as a publication is `put`'s job, once they are known to be usable."""
        sha = hashlib.sha256(data).hexdigest()
        with self._writing():
            self._write_object(sha, data)
        return sha

    def keep_rejected(
        self,
        source: str,
        data: bytes,
        *,
        original_name: str | None = None,
        reason: str = "",
        filed: bool = True,
    ) -> str:
        """Keep bytes that could not be archived as a publication (unreadable, no usable
        publisher date, unknown source...) for inspection: the object is stored
        content-addressed and a note is written under `rejected/<source>/` (`filed`: the
        source is known) or `rejected/_unfiled/`. Never raises for a bad name. Returns
        where the bytes are (the object's path), for the refusal message."""
        sha = hashlib.sha256(data).hexdigest()
        with self._writing():
            self._write_object(sha, data)
            note_dir = self.root / "rejected" / _rejected.note_folder(source, filed=filed)
            self._ensure_dir(note_dir)
            name, note = _rejected.note(source, sha, len(data), original_name, reason, now_us())
            self._write_once(note_dir / name, note)
        return str(self.path_of(sha))

    @staticmethod
    def _encode(ref: PayloadRef) -> bytes:
        return _sidecar_bytes(ref)

    def _existing(self, path: Path, source: str) -> PayloadRef:
        try:
            return _parse_sidecar(path)
        except ValueError as exc:
            raise FeedledgerError(
                f"archive sidecar {path} is damaged: {exc}",
                source=source,
                hint="inspect or restore the file; the archive never rewrites it",
            ) from exc

    def _write_object(self, sha: str, data: bytes) -> bool:
        final = self.path_of(sha)
        if final.exists():
            return False
        self._ensure_dir(final.parent)
        return self._write_once(final, data)

    def _write_once(self, final: Path, data: bytes) -> bool:
        """Atomically create `final` with `data` (read-only) unless it exists. True if created."""
        directory = final.parent
        tmp = directory / f".{final.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o444)
            try:
                os.link(tmp, final)
                created = True
            except FileExistsError:
                created = False
            except OSError:  # pragma: no cover - file systems without hard links
                if final.exists():
                    created = False
                else:
                    os.rename(tmp, final)
                    created = True
        finally:
            tmp.unlink(missing_ok=True)
        if created:
            _fsync_dir(directory)
        return created

    def _ensure_dir(self, path: Path) -> None:
        """mkdir -p, fsync'ing the parent of every directory created."""
        if path.is_dir():
            return
        missing: builtins.list[Path] = []
        probe = path
        while not probe.is_dir():
            missing.append(probe)
            if probe.parent == probe:
                break
            probe = probe.parent
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            _fsync_dir(directory.parent)

    @contextmanager
    def _source_lock(self, meta_dir: Path) -> Iterator[None]:
        fd = os.open(meta_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock_exclusive(fd)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- reading -----------------------------------------------------------------------

    def has(self, sha256: str) -> bool:
        try:
            return self.path_of(sha256).is_file()
        except NotFoundError:
            return False

    def get(self, sha256: str) -> bytes:
        """The object's bytes, verified against its hash."""
        path = self.path_of(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise NotFoundError(f"no archived object with sha256 {sha256}") from exc
        except OSError as exc:
            raise FeedledgerError(f"cannot read archived object {path}: {exc}") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise FeedledgerError(
                f"archived object {path} is corrupt: its bytes hash to {actual}, not {sha256}",
                hint="restore it from a backup or re-fetch the payload",
            )
        return data

    def _sidecars(self, base: Path, source: str | None) -> Iterator[Path]:
        if source is not None:
            _check_source(source)
            dirs = [base / source]
        else:
            try:
                dirs = sorted(p for p in base.iterdir() if p.is_dir())
            except FileNotFoundError:
                return
        for directory in dirs:
            try:
                names = sorted(os.listdir(directory))
            except FileNotFoundError:
                continue
            for name in names:
                if name.endswith(".json") and not name.startswith("."):
                    yield directory / name

    def _load(
        self, paths: Iterator[Path], start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        refs: builtins.list[PayloadRef] = []
        for path in paths:
            match = _SIDECAR_RE.match(path.name)
            if match is None:
                warnings.warn(
                    f"skipping archive sidecar {path}: unexpected file name", stacklevel=3
                )
                continue
            ts = int(match["ts"])
            if (start_us is not None and ts < start_us) or (end_us is not None and ts > end_us):
                continue
            try:
                refs.append(_parse_sidecar(path))
            except ValueError as exc:
                warnings.warn(f"skipping archive sidecar {path}: {exc}", stacklevel=3)
        refs.sort(key=lambda r: (r.published_at, r.payload_id))
        return refs

    def scan(self, source: str | None = None) -> builtins.list[PayloadRef]:
        """All accepted payloads (of one source, or all), by (published_at, payload_id)."""
        return self._load(self._sidecars(self.root / "meta", source))

    def list(
        self, source: str, start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        """Accepted payloads of `source` with start_us <= published_at <= end_us, in order."""
        return self._load(self._sidecars(self.root / "meta", source), start_us, end_us)

    def rejected(self, source: str) -> builtins.list[_rejected.RejectedPayload]:
        """Refused payloads of `source` (filed under it, or unfiled notes naming it),
        oldest refusal first. Unreadable notes are skipped with a warning."""
        _check_source(source)
        return _rejected.in_folder(self.root / "rejected", source, self.path_of)
