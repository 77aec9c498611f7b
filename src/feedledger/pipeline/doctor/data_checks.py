"""`doctor`'s checks of the data the ledger stands on: each source's state cache against
history (`verify`, sampled above a size), the archive's objects read back (`archive
verify`, sampled per source), and the disk free under the store and the archive. Each
check is one function returning its findings and a note of how much it looked at."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.ledger.queries import count_keys
from feedledger.model.errors import FeedledgerError
from feedledger.pipeline.doctor.findings import ERROR, WARNING, Finding, Options
from feedledger.pipeline.verify import verify, verify_sample

# looks at a source's state before a difference is judged while runs keep committing
RECHECKS = 3

if TYPE_CHECKING:
    from feedledger.context import Context
    from feedledger.model.payload import PayloadRef


def check_state_cache(ctx: Context, source: str, opts: Options) -> tuple[list[Finding], str]:
    """The source's diff state (the local cache file the next diff loads, and the store's
    columnar read) against the latest version per key recomputed from history: whole
    below `opts.full_verify_below` keys or with `opts.full`; above, the cache
    against history for `opts.key_sample` random keys, and its key count against
    history's."""
    peeked = ctx.cache.peek(source)
    live = peeked[0].height if peeked is not None else count_keys(ctx.store, source)
    whole = opts.full or live < opts.full_verify_below
    how = "whole" if whole else f"sampled ({opts.key_sample:,} of {live:,} keys)"
    for _ in range(RECHECKS):
        before = _seq(ctx, source)
        report = verify(ctx, source) if whole else verify_sample(ctx, source, opts.key_sample)
        bad = [c for c in report["checks"] if not c["ok"]]
        if not bad or _seq(ctx, source) == before:
            break
    else:  # a run committed during each look: what was compared may be of two moments
        return [], how + f"; not judged: {source} advanced during each of {RECHECKS} looks"
    if not bad:
        return [], how
    parts = []
    for c in bad:
        counts = [f"{len(c[k])} {k}" for k in ("missing", "extra", "different") if c[k]]
        counts += [c["note"]] if c.get("note") else []
        first = (c["missing"] + c["extra"] + c["different"])[:3]
        parts.append(f"{c['name']}: {', '.join(counts)} (e.g. {', '.join(map(str, first))})")
    cache_only = all(c["name"] == "cache" for c in bad)
    files = ctx.cache.directory / f"{source}.*.arrow"
    return [
        Finding(
            "state_cache_mismatch",
            ERROR,
            source,
            f"the diff state disagrees with history ({how}): " + "; ".join(parts),
            "the next payload would be diffed against a wrong state: changes missed or "
            "invented" + ("" if cache_only else "; the store's own state read is wrong too"),
            f"rm {files} (the next run rebuilds it from the store), then feedledger verify {source}"
            if cache_only
            else f"feedledger verify {source} --json (the keys), and report it: the store "
            "disagrees with its own history",
        )
    ], how


def _seq(ctx: Context, source: str) -> int:
    """The commit the source's watermark is at: when it moves during a look, history,
    the store's state and the cache may have been read at different moments, and a
    difference between them be that commit rather than a fault."""
    wm = ctx.store.watermark(source)
    return wm.txn_seq if wm else 0


def _sample(refs: list[PayloadRef], n: int, rng: random.Random) -> list[PayloadRef]:
    """`n` payloads: the newest (its chain reaches back to the last keyframe) and the
    rest drawn at random."""
    if len(refs) <= n:
        return refs
    newest = refs[-1]
    return [*rng.sample(refs[:-1], max(0, n - 1)), newest]


def _bad_object(ref: PayloadRef, error: str) -> Finding:
    return Finding(
        "archive_object_bad",
        ERROR,
        ref.source,
        f"payload {ref.label}, published {ref.to_json()['published_at']}, cannot be read "
        f"back: {error}",
        "its bytes are the evidence its versions were derived from; a replay or backfill "
        "through it fails (and every later payload of its chain with it)",
        f"feedledger archive verify {ref.source} (every payload), then restore the object "
        "from a backup, or archive the publisher's copy again: feedledger archive add "
        f"{ref.source} FILE --published-at DATE",
    )


def check_archive(ctx: Context, sources: list[str], opts: Options) -> tuple[list[Finding], str]:
    """Archived payloads read back whole (every frame of their chain decompressed) and
    their sha256 checked: all with `opts.full` (`archive verify`), otherwise `opts.sample`
    per source."""
    if opts.full:
        items = ctx.archive.verify(None)
        got = [_bad_object(i.ref, i.error or "unreadable") for i in items if not i.ok]
        return got, f"every payload ({len(items):,})"
    rng = random.Random()
    got, read = [], 0
    for source in sources:
        for ref in _sample(ctx.archive.list(source), opts.sample, rng):
            read += 1
            try:
                ctx.archive.get(ref.sha256)
            except FeedledgerError as exc:
                got.append(_bad_object(ref, str(exc)))
    return got, f"sampled ({read:,} payloads, up to {opts.sample} per source)"


def _existing(path: Path) -> Path:
    """`path`, or its nearest folder that exists (a new archive's folder may not yet)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def store_folder(store_url: str) -> Path | None:
    """The folder of an SQLite store's file; None for a server (PostgreSQL)."""
    prefix = "sqlite:///"
    if not store_url.startswith(prefix) or store_url == f"{prefix}:memory:":
        return None
    return Path(store_url[len(prefix) :]).parent


def check_disk(ctx: Context, opts: Options) -> tuple[list[Finding], str]:
    """Free space under the store's folder (SQLite) and the archive's (local), against
    `opts.min_free_bytes` and `opts.min_free_fraction` of the file system."""
    ws = ctx.workspace
    places: list[tuple[str, Path]] = []
    notes = []
    folder = store_folder(ws.store_url)
    if folder is None:
        notes.append("store: not checked (a database server's disk)")
    else:
        places.append(("store", folder))
    if ws.archive_is_local:
        places.append(("archive", Path(ws.archive_location)))
    else:
        notes.append("archive: not checked (object storage)")
    got = []
    for what, path in places:
        usage = shutil.disk_usage(_existing(path))
        least = max(opts.min_free_bytes, int(usage.total * opts.min_free_fraction))
        notes.append(f"{what}: {usage.free / (1 << 30):.1f} GiB free")
        if usage.free < least:
            got.append(
                Finding(
                    "disk_low",
                    WARNING,
                    str(path),
                    f"the {what}'s file system has {usage.free / (1 << 30):.2f} GiB free of "
                    f"{usage.total / (1 << 30):.1f} GiB (under {least / (1 << 30):.2f} GiB)",
                    "a full disk stops every ingest (a payload is archived before anything "
                    "else, and each is one transaction): nothing is lost, nothing advances",
                    "free space or grow the volume; feedledger archive compact shrinks an "
                    "archive stored raw",
                )
            )
    return got, "; ".join(notes)
