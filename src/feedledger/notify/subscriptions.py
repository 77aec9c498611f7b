"""Subscribers (who hears about which sources, how) -- rows in the store, so every
dispatching worker sees the same list. Secrets are never stored: only the name of the
environment variable that holds one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update

from feedledger.ledger.store import Store
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.timeutil import iso, now_us
from feedledger.notify.tables import deliveries, subscribers

KINDS = ("webhook", "file")
DIGESTS = ("none", "hourly", "daily")
UNDELIVERED = ("pending", "failed", "dead")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# shown instead of a stored `secret_env` that is no variable name (an older store may
# hold the secret itself there): never echoed
HIDDEN_SECRET_ENV = "<hidden: not an environment variable name>"


# A secret can itself be a valid identifier (`whsec_MfKQ9r8G…` is one): values with a
# token vendor's prefix, or long mixed-case-and-digit strings, are taken for secrets
_SECRET_PREFIXES = (
    "whsec_", "sk_", "rk_", "pk_live", "pk_test", "ghp_", "gho_", "ghs_", "ghu_",
    "github_pat_", "glpat", "xox", "akia", "asia",
)  # fmt: skip


def looks_like_secret(value: str) -> bool:
    if value.lower().startswith(_SECRET_PREFIXES):
        return True
    return len(value) >= 20 and not value.isupper() and any(c.isdigit() for c in value)


def is_env_name(value: str) -> bool:
    return ENV_NAME_RE.match(value) is not None and not looks_like_secret(value)


@dataclass(frozen=True, slots=True)
class Subscriber:
    name: str
    kind: str
    target: str
    secret_env: str | None
    sources: tuple[str, ...] | None  # None: every source
    digest: str
    created_at: int

    def wants(self, source: str) -> bool:
        return self.sources is None or source in self.sources

    @property
    def secret_env_shown(self) -> str | None:
        """`secret_env` as it may be shown: masked unless it is a variable's name."""
        if self.secret_env is None or is_env_name(self.secret_env):
            return self.secret_env
        return HIDDEN_SECRET_ENV

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "secret_env": self.secret_env_shown,
            "sources": list(self.sources) if self.sources is not None else None,
            "digest": self.digest,
            "created_at": iso(self.created_at),
        }


def _row(r: Any) -> Subscriber:
    return Subscriber(
        name=r.name,
        kind=r.kind,
        target=r.target,
        secret_env=r.secret_env,
        sources=tuple(r.sources.split(",")) if r.sources else None,
        digest=r.digest,
        created_at=r.created_at,
    )


def add(store: Store, sub: Subscriber) -> None:
    with store.begin() as conn:
        if conn.execute(select(subscribers.c.name).where(subscribers.c.name == sub.name)).first():
            raise ConfigError(
                f"subscriber {sub.name!r} already exists",
                hint="remove it first with `feedledger subscriber remove`",
            )
        conn.execute(
            insert(subscribers).values(
                name=sub.name,
                kind=sub.kind,
                target=sub.target,
                secret_env=sub.secret_env,
                sources=",".join(sub.sources) if sub.sources is not None else None,
                digest=sub.digest,
                created_at=sub.created_at or now_us(),
            )
        )


def listing(store: Store) -> list[Subscriber]:
    with store.engine.connect() as conn:
        return [_row(r) for r in conn.execute(select(subscribers).order_by(subscribers.c.name))]


def remove(store: Store, name: str) -> int:
    """Remove the subscriber; its undelivered messages are cancelled (returns how many)."""
    with store.begin() as conn:
        gone = conn.execute(delete(subscribers).where(subscribers.c.name == name)).rowcount
        if not gone:
            raise NotFoundError(f"no subscriber named {name!r}")
        result = conn.execute(
            update(deliveries)
            .where(deliveries.c.subscriber == name, deliveries.c.status.in_(UNDELIVERED))
            .values(
                status="cancelled",
                last_error="subscriber removed",
                claimed_by=None,
                claimed_until=None,
            )
        )
        return int(result.rowcount or 0)
