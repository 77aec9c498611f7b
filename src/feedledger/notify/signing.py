"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

Headers: `webhook-id` (the message's stable idempotency key), `webhook-timestamp` (Unix
seconds) and `webhook-signature`: `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
A secret written `whsec_<base64>` is the base64-decoded key, as the convention specifies;
any other secret is used as its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac


def secret_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"))
    return secret.encode("utf-8")


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    payload = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), payload, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str | None, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    out = {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
    }
    if secret is not None:
        out["webhook-signature"] = sign(secret, message_id, timestamp, body)
    return out


def verify(secret: str, message_id: str, timestamp: str, body: bytes, signature: str) -> bool:
    """True if any `v1,` signature in the (space-separated) header matches."""
    expected = sign(secret, message_id, int(timestamp), body)
    return any(hmac.compare_digest(expected, s) for s in signature.split())
