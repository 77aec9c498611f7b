"""Catch-up: a window of publications applied at their own publisher dates, never a
naive catch-up to the newest.

Modules: `served` (what the publisher still serves for some days, and filling the
archive from it), `assess` (a window before a backfill: what the archive holds, what is
replayable, late or missing, what is fetchable now), `backfill` (a window's
archived payloads applied in publisher order under one lease; resumed when interrupted),
`replay` (a retraction from a day, then every archived payload from it re-applied),
`applying` (the loop the two share), `replay_retraction`
(what a replay's retraction cancels and tells subscribers, in its transaction),
`report` (what a backfill or replay did, and its last transaction: gap records and ONE
summary notification) and `recovery` (a `run` or the scheduler finding several
publications waiting: fill, then backfill).

May import: the pipeline's own single-payload modules (`archiving`, `apply`,
`observing`, `health`), the ledger, `formats`, `notify`, `context`, `model`; the
fetchers (`sources`) only inside functions (httpx loads when the publisher is asked).
`run` and `scheduling` import it, never the other way round.
"""
