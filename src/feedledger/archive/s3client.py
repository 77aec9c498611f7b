"""S3 access for the object-store archive, and its blob store (`archive/blobs.py`):
``s3://`` URLs, the endpoint, an s3fs file system created on first use, conditional
puts, listings, and one clear FeedledgerError naming the archive for whatever s3fs or
botocore raise.

Credentials are never handled here: botocore's standard chain finds them.
"""

from __future__ import annotations

import builtins
import os
import re
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

from feedledger.model.errors import ArchiveUnavailableError, ConfigError, FeedledgerError

SCHEME = "s3://"
ENDPOINT_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
PROBE = "claims/.conditional-write-probe"
_BUCKET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]$")
_CREDENTIALS_HINT = (
    "credentials come only from the standard AWS environment variables or profile "
    "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), never from feedledger.toml"
)
_DENIED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
_DENIED |= {"ExpiredToken", "InvalidToken", "AllAccessDisabled"}


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix``; ConfigError if it is not one."""
    bucket, _, prefix = url.removeprefix(SCHEME).partition("/")
    prefix = prefix.rstrip("/")
    parts = prefix.split("/") if prefix else []
    if (
        not url.startswith(SCHEME)
        or not _BUCKET_RE.match(bucket)
        or any(p in ("", ".", "..") for p in parts)
        or any(c in url for c in "?#\\")
    ):
        raise ConfigError(
            f"archive URL {url!r} is not s3://BUCKET/PREFIX",
            hint="a bucket name (3+ letters, digits, '.', '-'), then an optional prefix",
        )
    return bucket, prefix


def resolve_endpoint(configured: str | None) -> str | None:
    """The endpoint URL to use: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL (unless
    AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true), the configured one, else None (AWS)."""
    candidates: builtins.list[tuple[str, str | None]] = []
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        candidates = [(var, os.environ.get(var)) for var in ENDPOINT_VARS]
    candidates.append(("[archive] endpoint_url", configured))
    for origin, value in candidates:
        if not value:
            continue
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"{origin} {value!r} is not an http(s) URL", hint="e.g. http://127.0.0.1:9000"
            )
        return value
    return None


def _error_code(exc: BaseException | None) -> str:
    """The S3 error code of a botocore ClientError, also behind s3fs's OSError wrappers."""
    while exc is not None:
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            return str(response.get("Error", {}).get("Code", ""))
        exc = exc.__cause__
    return ""


class S3Client:
    """The keys under one ``s3://bucket/prefix``, addressed relative to the prefix: the
    archive's blob store on S3-compatible storage. Every key is created by a conditional
    put (``If-None-Match: *``), which the store refuses (412) when the key exists."""

    def __init__(self, url: str, *, endpoint_url: str | None = None) -> None:
        self.bucket, self.prefix = parse_s3_url(url)
        self.url = f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")
        self.endpoint_url = resolve_endpoint(endpoint_url)
        self._fs: Any = None
        self._ready = False
        self._conditional: bool | None = None
        self._lock = threading.Lock()

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def url_of(self, rel: str) -> str:
        return f"{SCHEME}{self.bucket}/{self.key(rel)}"

    # -- the blob store (archive/blobs.py) ---------------------------------------------

    def where(self, rel: str) -> str:
        return self.url_of(rel)

    def missing(self, sha256: str) -> str:
        return f"no archived object with sha256 {sha256} in {self.url}"

    def prepare(self) -> None:
        """Check the bucket answers and takes conditional writes (never creates it)."""
        self.connect()
        self.conditional_writes()

    def writing(self) -> AbstractContextManager[None]:
        return nullcontext()  # every request already fails with one clear error

    def slot(self, folder: str) -> AbstractContextManager[bool]:
        return nullcontext(False)  # no locks on S3: the archive's claim keys decide

    def _filesystem(self) -> Any:
        with self._lock:
            if self._fs is None:
                try:
                    import s3fs  # lazy: optional extra (feedledger[s3])
                except ImportError as exc:
                    raise ConfigError(
                        f"the archive {self.url} is on S3-compatible storage, which needs s3fs",
                        hint="pip install 'feedledger[s3]'",
                    ) from exc
                config: dict[str, Any] = {"connect_timeout": 10, "read_timeout": 60}
                if not os.environ.get("AWS_MAX_ATTEMPTS") and not os.environ.get("AWS_RETRY_MODE"):
                    config["retries"] = {"max_attempts": 3, "mode": "standard"}
                self._fs = s3fs.S3FileSystem(
                    endpoint_url=self.endpoint_url,
                    skip_instance_cache=True,  # its own session, with today's environment
                    use_listings_cache=False,  # other workers write too: always list afresh
                    config_kwargs=config,
                )
                self._fs.retries = 2  # s3fs's own retries, on top of botocore's
            return self._fs

    def _fail(self, exc: BaseException, doing: str) -> FeedledgerError:
        """A clear error naming the archive for whatever s3fs/botocore raised."""
        from botocore import exceptions as bx  # lazy: s3fs's, as above
        from fsspec.exceptions import FSTimeoutError  # lazy: s3fs's, as above

        where = self.endpoint_url or "AWS S3"
        code = _error_code(exc)
        if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
            problem, hint = f"no usable AWS credentials ({exc})", _CREDENTIALS_HINT
        elif isinstance(exc, bx.ProfileNotFound | bx.CredentialRetrievalError):
            problem, hint = str(exc), _CREDENTIALS_HINT
        elif isinstance(exc, bx.ConnectionError | bx.HTTPClientError | FSTimeoutError):
            problem = f"cannot reach the object store at {where} ({exc})"
            hint = "is it up? its endpoint comes from AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL "
            hint += "or [archive] endpoint_url in feedledger.toml"
        elif code == "NoSuchBucket":
            problem = f"bucket {self.bucket!r} does not exist at {where}"
            hint = "create it first; feedledger never creates buckets"
        elif code in _DENIED:
            problem, hint = f"access denied while {doing} ({exc})", _CREDENTIALS_HINT
        else:
            return FeedledgerError(f"archive {self.url}: {doing} failed: {exc}")
        return ArchiveUnavailableError(f"archive {self.url}: {problem}", hint=hint)

    def _call(self, method: str, doing: str, **kwargs: Any) -> Any:
        """One S3 request; FileNotFoundError / FileExistsError pass through for the
        caller, anything else becomes a FeedledgerError."""
        fs = self._filesystem()
        try:
            return fs.call_s3(method, Bucket=self.bucket, **kwargs)
        except (FileNotFoundError, FileExistsError) as exc:
            if _error_code(exc) == "NoSuchBucket":
                raise self._fail(exc, doing) from exc
            raise
        except Exception as exc:
            raise self._fail(exc, doing) from exc

    def connect(self) -> None:
        """Check once that the bucket answers: a clear error up front beats one per key."""
        if self._ready:
            return
        try:
            self._call("head_bucket", f"checking bucket {self.bucket!r}")
        except FileNotFoundError as exc:  # HEAD has no body: a bare 404 is the bucket
            raise ArchiveUnavailableError(
                f"archive {self.url}: bucket {self.bucket!r} does not exist at "
                f"{self.endpoint_url or 'AWS S3'}",
                hint="create it first; feedledger never creates buckets",
            ) from exc
        self._ready = True

    def exists(self, rel: str) -> bool:
        try:
            self._call("head_object", f"looking up {self.url_of(rel)}", Key=self.key(rel))
        except FileNotFoundError:
            return False
        return True

    def _put_if_absent(self, rel: str, data: bytes) -> bool:
        """Conditional put; False if the key exists (HTTP 412)."""
        for attempt in range(5):
            try:
                self._call(
                    "put_object", f"writing {self.url_of(rel)}",
                    Key=self.key(rel), Body=data, IfNoneMatch="*",
                )  # fmt: skip
                return True
            except FileExistsError:
                return False
            except FeedledgerError as exc:
                code = _error_code(exc.__cause__)
                if code in ("PreconditionFailed", "412"):
                    return False
                if code != "ConditionalRequestConflict" or attempt == 4:
                    raise
                time.sleep(0.05 * 2**attempt)  # 409: another conditional write in flight
        raise AssertionError("unreachable")  # pragma: no cover

    def conditional_writes(self) -> bool:
        """Whether the store refuses to overwrite under If-None-Match (checked once)."""
        if self._conditional is None:
            honoured = not self._put_if_absent(PROBE, b"") or not self._put_if_absent(PROBE, b"")
            if not honoured:
                warnings.warn(
                    f"archive {self.url}: the object store at {self.endpoint_url or 'AWS S3'} "
                    "ignores conditional writes (If-None-Match); write-once falls back to "
                    "looking before writing, which cannot stop two workers racing",
                    stacklevel=4,
                )
            self._conditional = honoured
        return self._conditional

    def create(self, rel: str, data: bytes) -> bool:
        """Write `rel` once; False (nothing written) if it exists."""
        if not self.conditional_writes() and self.exists(rel):
            return False
        return self._put_if_absent(rel, data)

    def delete(self, rel: str) -> None:
        """Remove `rel` (only `archive compact` does, once its replacement is stored)."""
        try:
            self._call("delete_object", f"deleting {self.url_of(rel)}", Key=self.key(rel))
        except FileNotFoundError:
            return

    def read(self, rel: str) -> bytes | None:
        """The bytes at `rel`, None if absent."""
        return self._fetch([rel])[rel]

    def read_many(self, rels: builtins.list[str]) -> dict[str, bytes | OSError | None]:
        """Several keys fetched concurrently; None for those absent (never an OSError:
        a failure is raised as a FeedledgerError)."""
        return dict(self._fetch(rels))

    def _fetch(self, rels: builtins.list[str]) -> dict[str, bytes | None]:
        if not rels:
            return {}
        fs = self._filesystem()
        paths = {f"{self.bucket}/{self.key(rel)}": rel for rel in rels}
        try:
            found = fs.cat(list(paths), on_error="return", max_concurrency=1)
        except Exception as exc:
            raise self._fail(exc, f"reading {self.url_of(rels[0])}") from exc
        out: dict[str, bytes | None] = {}
        for path, rel in paths.items():
            value = found[path]
            if isinstance(value, FileNotFoundError) and _error_code(value) != "NoSuchBucket":
                out[rel] = None
            elif isinstance(value, BaseException):
                raise self._fail(value, f"reading {self.url_of(rel)}") from value
            else:
                out[rel] = bytes(value)
        return out

    def list(self, rel_prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Keys (relative to the archive) under `rel_prefix`, in key order."""
        strip = len(self.key(""))
        kwargs: dict[str, Any] = {"Prefix": self.key(rel_prefix)}
        if start_after is not None:
            kwargs["StartAfter"] = self.key(start_after)
        while True:
            page = self._call("list_objects_v2", f"listing {self.url_of(rel_prefix)}", **kwargs)
            for item in page.get("Contents", []):
                yield item["Key"][strip:]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token
