"""Run ids as people type them: the whole id or any unique prefix (as git takes hashes).

Tables show run ids cut short; every command that takes a RUN_ID resolves it here, so
what a table shows can be typed back.
"""

from __future__ import annotations

import re

from feedledger.ledger import runs
from feedledger.ledger.store import Store
from feedledger.model.errors import ConfigError, NotFoundError

_SHOWN = 10  # matches named in an "ambiguous" error
_PREFIX = re.compile(r"^[0-9A-Za-z-]+$")


def resolve(store: Store, text: str) -> str:
    """The full run id `text` names: itself, or the one run id it is a prefix of.

    Unknown: NotFoundError (exit 3). A prefix of several: ConfigError (exit 2) listing
    the matches (source, kind, run id) so the user can pick one."""
    wanted = text.strip()
    if not wanted or not _PREFIX.match(wanted):
        raise NotFoundError(
            f"unknown run id {text!r}", hint="list runs with `feedledger runs SOURCE`"
        )
    if runs.run_exists(store, wanted):
        return wanted
    # run ids are letters, digits and '-': no LIKE wildcard can occur in the prefix
    rows = runs.with_prefix(store, wanted.lower(), _SHOWN + 1)
    if not rows:
        raise NotFoundError(
            f"unknown run id {text!r}", hint="list runs with `feedledger runs SOURCE`"
        )
    if len(rows) == 1:
        return str(rows[0].run_id)
    named = ", ".join(f"{r.run_id} ({r.source} {r.kind})" for r in rows[:_SHOWN])
    more = " and more" if len(rows) > _SHOWN else ""
    raise ConfigError(
        f"run id prefix {text!r} is ambiguous: it matches {named}{more}",
        hint="give more characters of the run id",
    )
