"""The loop backfill and replay share: archived payloads applied in publisher order,
each in its own transaction with ITS OWN publisher date as `valid_from`, under the run
the caller holds the source's lease for; and the one source a backfill or replay takes.
"""

from __future__ import annotations

from collections.abc import Callable

from feedledger import faults
from feedledger.context import Context
from feedledger.formats import read_observations
from feedledger.ledger.runs.leases import LeasedRun
from feedledger.model.errors import ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.sizes import within_default
from feedledger.model.source import SourceConfig
from feedledger.pipeline.catchup.report import Step
from feedledger.pipeline.intake.apply import apply_observations

# progress(done, total, payload just applied or None before the first)
Progress = Callable[[int, int, PayloadRef | None], None]


def one_source(source: str | list[str]) -> str:
    """The one source name of a backfill or replay (`a,b` and several names are refused,
    naming why)."""
    names = [source] if isinstance(source, str) else list(source)
    names = [n for part in names for n in part.split(",") if n.strip()]
    if len(names) != 1:
        raise ConfigError(
            f"backfill and replay take one source at a time, not {len(names)} "
            f"({', '.join(names) or 'none'}): sources publish on different dates and keep "
            "different archives, and one run id per source keeps each retractable on its own",
            hint="run the command once per source",
        )
    return names[0].strip()


def apply_payloads(
    ctx: Context,
    src: SourceConfig,
    refs: list[PayloadRef],
    *,
    run: LeasedRun,
    notify: bool,
    allow_mass_delete: bool,
    progress: Progress | None,
) -> list[Step]:
    steps: list[Step] = []
    if progress:
        progress(0, len(refs), None)
    # each payload's state is the one the previous payload committed: kept in memory
    # between them (checked against the watermark before each use, like the file cache)
    with ctx.cache.resident():
        for i, ref in enumerate(refs, start=1):
            data = ctx.archive.get(ref.sha256)
            # (a payload too large for the whole path: within the default budget)
            bound = within_default(src, len(data))
            obs = read_observations(data, bound, label=ref.label)
            applied = apply_observations(
                ctx,
                bound,
                ref,
                obs,
                run_id=run.run_id,
                holder=run.holder,
                backfill=True,
                allow_mass_delete=allow_mass_delete,
                outbox_status="pending" if notify else "suppressed",
            )
            steps.append(
                Step(ref.published_at, ref.payload_id, applied.changes, applied.invalid_geometries)
            )
            if progress:
                progress(i, len(refs), ref)
            faults.point("after_payload", i)
    return steps
