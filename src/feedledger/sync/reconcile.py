"""Manifests (a frozen population) and `reconcile`: is the destination complete?

`reconcile` compares the destination with the manifest and the ledger. Bucketed
checksums first (per range of keys: rows, revisions, generations, tombstones, computed
IN the destination against the same figures expected from the ledger) find the ranges
that differ; only those are read record by record, and every finding carries its
evidence: key, expected revision and generation, found revision and generation. A sync
is complete only when nothing is unexplained and the outcome counts add up to the
population.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedledger.context import Context
from feedledger.formats.keys import key_candidates
from feedledger.model.destination import generation_rank, is_deletion
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import now_us
from feedledger.sync import manifests, registry, versions
from feedledger.sync import state as sync_state
from feedledger.sync.kinds import DestinationKind, open_target
from feedledger.sync.manifests import Manifest
from feedledger.sync.transform import revision_of

BUCKET = 10_000
MISSING_VERDICTS_SHOWN = 100  # keys without a verdict listed by reconcile (all are counted)
MOD = 2305843009213693951  # 2^61 - 1, as the destination's checksum uses


def create_manifest(
    ctx: Context,
    name: str,
    source: str,
    *,
    generation: str | None = None,
    keys_from: Path | None = None,
) -> Manifest:
    src = ctx.workspace.source(source)
    gen = generation or next((d.generation for d in registry.listing(ctx.store, source)), "M-1")
    generation_rank(gen)
    at = now_us()
    wm = ctx.store.watermark(source)
    live = versions.live_keys(ctx.store, source, at)
    if keys_from is None:
        keys = sorted(live)
        reconstructible = True
    else:
        try:
            lines = keys_from.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read --keys-from {keys_from}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"--keys-from {keys_from} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                f"at offset {exc.start})",
                hint="save it as UTF-8, one key per line",
            ) from None
        picked: set[str] = set()
        for line in (x.strip() for x in lines):
            if not line:
                continue
            cands = key_candidates(src, line)
            picked.add(next((c for c in cands if c in live), cands[0]))
        keys = sorted(picked)
        reconstructible = all(k in live for k in keys)
    return manifests.create(
        ctx.store,
        name=name,
        source=source,
        created_at=at,
        boundary=(
            wm.published_at if wm else None,
            wm.payload_id if wm else None,
            wm.txn_seq if wm else None,
        ),
        generation=gen,
        reconstructible=reconstructible,
        keys=keys,
        keys_from=str(keys_from) if keys_from else None,
    )


@dataclass
class Reconciliation:
    destination: str
    manifest: str
    population: int
    outcomes: dict[str, int]
    buckets: int = 0
    buckets_differing: int = 0
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    wrong_generation: list[dict[str, Any]] = field(default_factory=list)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    # manifest keys no sync recorded a verdict for (the first ones; all are counted)
    missing_verdicts: list[Any] = field(default_factory=list)
    missing_verdicts_count: int = 0

    @property
    def counted(self) -> int:
        return sum(self.outcomes.values())

    @property
    def complete(self) -> bool:
        findings = (self.missing, self.extra, self.duplicates, self.stale,
                    self.wrong_generation, self.unresolved)  # fmt: skip
        return (
            not any(findings)
            and not self.missing_verdicts_count
            and self.counted == self.population
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "manifest": self.manifest,
            "complete": self.complete,
            "population": self.population,
            "outcomes": self.outcomes,
            "outcomes_total": self.counted,
            "buckets": self.buckets,
            "buckets_differing": self.buckets_differing,
            "missing": self.missing,
            "extra": self.extra,
            "duplicates": self.duplicates,
            "stale": self.stale,
            "wrong_generation": self.wrong_generation,
            "unresolved": self.unresolved,
            "missing_verdicts": self.missing_verdicts,
            "missing_verdicts_count": self.missing_verdicts_count,
        }


def reconcile(ctx: Context, name: str, manifest_name: str) -> Reconciliation:
    dest = registry.get(ctx.store, name)
    man = manifests.get(ctx.store, manifest_name)
    if man.source != dest.source:
        raise ConfigError(
            f"manifest {man.name} is of source {man.source}, destination {dest.name} of "
            f"{dest.source}"
        )
    result = Reconciliation(
        dest.name,
        man.name,
        man.population,
        sync_state.counts(ctx.store, dest.name, man.manifest_id),
    )
    result.unresolved = sync_state.of_verdict(
        ctx.store, dest.name, man.manifest_id, "unresolved"
    ) + sync_state.of_verdict(ctx.store, dest.name, "live", "unresolved")
    result.missing_verdicts_count, unjudged = sync_state.without_verdict(
        ctx.store, dest.name, man.manifest_id, MISSING_VERDICTS_SHOWN
    )
    result.missing_verdicts = [json.loads(k) for k in unjudged]
    want_rank = generation_rank(man.generation)
    use_revision = ctx.workspace.source(dest.source).revision is not None
    src = ctx.workspace.source(dest.source)
    target = open_target(dest, geo=src.is_geo, store=ctx.store, key=src.key)
    try:
        target.ensure()
        population = set(manifests.all_keys(ctx.store, man.manifest_id))
        expected, others = _expected(ctx, dest.source, use_revision, population)
        keys = sorted(expected)
        bounds = _bounds(keys)
        result.buckets = len(bounds) + 1
        sums = target.bucket_sums(bounds) if bounds else []
        suspect: list[tuple[str, str]] = []
        for (lo, hi), got in zip(bounds, sums, strict=True):
            want = _sums(expected, keys, lo, hi, want_rank)
            if got != want:
                suspect.append((lo, hi))
        # rows outside every bucket (before the first / after the last expected key, or
        # none expected at all) are read too
        outside = _outside(target, keys)
        result.buckets_differing = len(suspect) + (1 if outside else 0)
        found: dict[str, tuple[Any, ...]] = {}
        seen: dict[str, int] = {}
        for lo, hi in suspect:
            for row in target.rows(lo, hi):
                seen[row[0]] = seen.get(row[0], 0) + 1
                found[row[0]] = row
        for row in outside:
            seen[row[0]] = seen.get(row[0], 0) + 1
            found[row[0]] = row
        in_suspect = [
            k for lo, hi in suspect for k in keys[bisect_left(keys, lo) : bisect_right(keys, hi)]
        ]
        _findings(result, expected, others, in_suspect, found, seen, want_rank, man)
    finally:
        target.close()
    # kept, so the last reconcile's findings can be shown later (`serve`'s destination)
    sync_state.record_reconcile(ctx.store, dest.name, man.name, now_us(), result.to_json())
    return result


def _expected(
    ctx: Context, source: str, use_revision: bool, population: set[str]
) -> tuple[dict[str, tuple[int, bool]], dict[str, tuple[int, bool]]]:
    """(revision, deleted) per key from the ledger's current state: for the manifest's
    keys (what the destination must hold) and for the others (what may explain a row
    the live route wrote since)."""
    state = versions.current_state(ctx.store, source)
    mine: dict[str, tuple[int, bool]] = {}
    others: dict[str, tuple[int, bool]] = {}
    use = use_revision
    for key, revision, deleted, version_id in state:
        if use:
            try:
                rev = revision_of(revision, int(version_id), True)
            except ValueError:
                continue
        else:
            rev = int(version_id)
        (mine if key in population else others)[key] = (rev, bool(deleted))
    return mine, others


def _bounds(keys: Sequence[str]) -> list[tuple[str, str]]:
    return [(keys[i], keys[min(i + BUCKET, len(keys)) - 1]) for i in range(0, len(keys), BUCKET)]


def _sums(
    expected: dict[str, tuple[int, bool]], keys: Sequence[str], lo: str, hi: str, rank: int
) -> tuple[int, int, int, int]:
    a, b = bisect_left(keys, lo), bisect_right(keys, hi)
    part = [expected[k] for k in keys[a:b]]
    return (
        len(part),
        sum(r % MOD for r, _d in part),
        rank * len(part),
        sum(1 for _r, d in part if d),
    )


def _outside(target: DestinationKind, keys: Sequence[str]) -> list[tuple[Any, ...]]:
    if not keys:
        return target.rows()
    rows = target.rows("", keys[0]) + target.rows(keys[-1], "\U0010ffff")
    return [r for r in rows if r[0] < keys[0] or r[0] > keys[-1]]


def _findings(
    result: Reconciliation,
    expected: dict[str, tuple[int, bool]],
    others: dict[str, tuple[int, bool]],
    keys: Sequence[str],
    found: dict[str, tuple[Any, ...]],
    seen: dict[str, int],
    rank: int,
    man: Manifest,
) -> None:
    def pretty(key: str) -> Any:
        return json.loads(key)

    for key in keys:
        rev, deleted = expected[key]
        row = found.get(key)
        evidence = {"key": pretty(key), "expected_revision": rev,
                    "expected_generation": man.generation, "expected_deleted": deleted}  # fmt: skip
        if row is None:
            if not deleted:
                result.missing.append({**evidence, "found": None})
            continue
        _k, frev, fgen, frank, fdel, fhash = row
        got = {"found_revision": int(frev), "found_generation": fgen, "found_deleted": bool(fdel)}
        # positions in the revision order: a deletion sorts just after the revision it deletes
        # (a record the transform left out is a tombstone in the place of its revision)
        found_at, want_at = (int(frev), is_deletion(fdel, fhash)), (rev, deleted)
        if found_at < want_at:
            note = {"note": "the deletion has not reached the destination"} if deleted else {}
            result.stale.append({**evidence, **got, **note})
        elif int(frank) < rank:
            result.wrong_generation.append({**evidence, **got})
        elif found_at != want_at:
            result.stale.append({**evidence, **got, "note": "newer than the ledger"})
    for key, row in found.items():
        if key in expected or bool(row[4]):
            pass
        elif key in others and not others[key][1]:  # written by the live route since
            if int(row[1]) < others[key][0]:
                result.stale.append(
                    {
                        "key": pretty(key),
                        "expected_revision": others[key][0],
                        "found_revision": int(row[1]),
                        "found_generation": row[2],
                        "note": "not in the manifest; the live route is behind",
                    }
                )
        else:
            result.extra.append(
                {
                    "key": pretty(key),
                    "found_revision": int(row[1]),
                    "found_generation": row[2],
                    "note": "neither in the manifest nor live in the ledger",
                }
            )
        if seen.get(key, 0) > 1:
            result.duplicates.append({"key": pretty(key), "rows": seen[key]})
