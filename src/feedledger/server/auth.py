"""Bearer tokens for the writes. The variable named by `serve --token-env VAR` holds
one or more comma-separated tokens, each `label:token` (the label is who the write
audit records) or a bare `token` (recorded as `token`). No variable, or an empty one:
the server is read-only and every write answers 403."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from feedledger.server.problems import Problem

BARE_LABEL = "token"


@dataclass(frozen=True)
class Token:
    label: str
    secret: str

    def __repr__(self) -> str:  # never print the secret
        return f"Token({self.label!r})"


def parse_tokens(text: str | None) -> list[Token]:
    """The tokens of the variable's value (ValueError naming the position of a bad one,
    never its text)."""
    tokens: list[Token] = []
    for i, part in enumerate((text or "").split(","), start=1):
        part = part.strip()
        if not part:
            continue
        label, sep, secret = part.partition(":")
        if not sep:
            label, secret = BARE_LABEL, part
        label, secret = label.strip(), secret.strip()
        if not label or not secret:
            raise ValueError(f"token {i} is empty or has an empty label (want LABEL:TOKEN)")
        tokens.append(Token(label, secret))
    return tokens


# declares the writes' bearer scheme in the OpenAPI document (/docs then offers
# "Authorize" and sends the header); `writer` reads and checks the header itself
_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="A write token: the TOKEN of one LABEL:TOKEN in `serve --token-env VAR`.",
)


async def writer(
    request: Request, _declared: HTTPAuthorizationCredentials | None = Security(_BEARER)
) -> str:
    """The label of the token a write request carries (a FastAPI dependency):
    403 if the server is read-only, 401 (WWW-Authenticate: Bearer) if the token is
    missing or unknown."""
    tokens: list[Token] = request.app.state.tokens
    if not tokens:
        raise Problem(
            403,
            "this server is read-only: start it with --token-env VAR, VAR set, to allow writes",
            kind="read-only",
        )
    header = request.headers.get("authorization", "")
    scheme, _sep, given = header.partition(" ")
    challenge = {"WWW-Authenticate": 'Bearer realm="feedledger"'}
    if scheme.lower() != "bearer" or not given.strip():
        raise Problem(401, "a write needs an Authorization: Bearer token", headers=challenge)
    given = given.strip()
    found = None
    for token in tokens:  # compare with every token, in constant time each
        if hmac.compare_digest(token.secret.encode(), given.encode()):
            found = token
    if found is None:
        challenge["WWW-Authenticate"] += ', error="invalid_token"'
        raise Problem(401, "the bearer token is not valid", headers=challenge)
    return found.label
