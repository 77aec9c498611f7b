"""The archive on S3-compatible object storage (AWS S3, MinIO, Ceph, R2, moto...)
through s3fs, for workers on several machines: `archive/core.py`'s rules over the blob
store of `archive/s3client.py`.

Location ``s3://bucket/prefix``; under the prefix, the folder archive's layout plus::

    claims/<source>/<published_at_us:020d>.json                who holds a publication slot
    claims/.conditional-write-probe                            (empty) see below

Write-once: every key is created by a conditional put (``If-None-Match: *``), which the
store refuses (412) when the key exists, so nothing is ever overwritten, even by workers
racing. Payload bytes are looked up first (HEAD), so identical bytes are not uploaded
twice. The first write of a process checks that the store honours the condition; where
it does not (some older S3-compatible servers), a warning says so and the archive falls
back to an existence check before each write, which cannot stop two workers racing.

No locks on S3, so two payloads claiming one publisher timestamp of a source are settled
by the slot's claim (see `archive/core.py`).

Credentials come only from the standard AWS chain (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE, shared files, instance roles), never from
feedledger.toml. A non-AWS endpoint comes from AWS_ENDPOINT_URL_S3, else
AWS_ENDPOINT_URL, else ``[archive] endpoint_url``; botocore reads the two variables
itself, but the archive resolves them too and passes the endpoint explicitly, so the
TOML setting works and errors name it. s3fs is imported on first use, not at start-up.
"""

from __future__ import annotations

from feedledger.archive.core import BlobArchive
from feedledger.archive.objects import DEFAULT_MIN_SIZE, KeyframeEvery
from feedledger.archive.s3client import S3Client


class S3Archive(BlobArchive):
    """Write-once, content-addressed payload store under an ``s3://bucket/prefix``."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        keyframe_every: KeyframeEvery | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
    ) -> None:
        self._s3 = S3Client(url, endpoint_url=endpoint_url)
        super().__init__(self._s3, keyframe_every=keyframe_every, min_size=min_size)
        self.url = self._s3.url
        self.bucket, self.prefix = self._s3.bucket, self._s3.prefix
        self.endpoint_url = self._s3.endpoint_url

    def __repr__(self) -> str:
        return f"S3Archive({self.url!r})"

    @property
    def location(self) -> str:
        return self.url
