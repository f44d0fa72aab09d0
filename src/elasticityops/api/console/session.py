"""Console sessions: an API token exchanged at login for a signed, expiring cookie.

The cookie holds the token's sha256 (what the store keys tokens by), its expiry and an HMAC over
both, keyed from the gateway's secret, so every replica reads every replica's cookies. Nothing
of the session is stored: each request looks the token up again (TokenChecker), so revoking the
token ends its sessions and its scope applies as it does to the token itself. A request that
changes something and comes with the cookie also needs the CSRF header, whose value is an HMAC
of the cookie: a page of another origin can neither read it nor (SameSite=Strict aside) send a
custom header without a preflight this gateway never grants."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime

from elasticityops.knobs import knob

COOKIE = "eops_session"
CSRF_HEADER = "x-eops-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_VERSION = "s1"
_SHAPE = re.compile(r"s1\.([0-9a-f]{64})\.([0-9]{1,12})\.([A-Za-z0-9_-]{43})")


@dataclass(frozen=True)
class SessionSettings:
    hours: float = knob(
        8.0,
        env="EOPS_CONSOLE_SESSION_HOURS",
        unit="hours",
        gt=0,
        le=24 * 30,
        help="How long a console login lasts (never past its token's own expiry).",
    )


@functools.lru_cache(maxsize=4)
def session_key(server_secret: bytes) -> bytes:
    """A key of its own for sessions, so a cookie's HMAC is no callback token's."""
    return hmac.new(server_secret, b"console-session", hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    digest = hmac.new(key, text.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def make_cookie(key: bytes, token_hash: str, expires: datetime) -> str:
    body = f"{_VERSION}.{token_hash}.{int(expires.timestamp())}"
    return f"{body}.{_mac(key, body)}"


def read_cookie(key: bytes, value: str, now: datetime) -> str | None:
    """The token hash of a well-formed, authentic, unexpired cookie; None for anything else."""
    match = _SHAPE.fullmatch(value)
    if match is None:
        return None
    token_hash, expires, mac = match.groups()
    if not hmac.compare_digest(mac, _mac(key, f"{_VERSION}.{token_hash}.{expires}")):
        return None
    if int(expires) <= now.timestamp():
        return None
    return token_hash


def csrf_value(key: bytes, cookie: str) -> str:
    """What the CSRF header must hold for requests made with this cookie."""
    return _mac(key, "csrf." + cookie)


def csrf_ok(key: bytes, cookie: str, header: str | None) -> bool:
    return header is not None and header.isascii() and hmac.compare_digest(header, csrf_value(key, cookie))
