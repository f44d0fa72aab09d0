"""Signing webhook deliveries as the Standard Webhooks specification says
(https://www.standardwebhooks.com): a `whsec_` secret per function, and the headers
`webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,` and the base64 of the
HMAC-SHA256 of "id.timestamp.body" keyed with the secret's decoded bytes), so a receiver checks
a delivery with any Standard Webhooks library."""

from __future__ import annotations

import base64
import hashlib
import hmac

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the specification asks for 24 to 64


def new_secret(random: bytes) -> str:
    """A secret from `random` (os.urandom's, SECRET_BYTES of them)."""
    if len(random) < 24:
        raise ValueError("a webhook secret needs at least 24 random bytes")
    return SECRET_PREFIX + base64.b64encode(random).decode("ascii")


def secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(secret: str, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one delivery attempt; `timestamp` is the attempt's (seconds since the
    epoch), since receivers refuse one more than a few minutes off their clock."""
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, webhook_id, timestamp, body),
        "content-type": "application/json",
    }
