"""Bearer-token authentication and scopes. API tokens are stored as sha256 hashes, never in
clear; every comparison is on bytes, and a header that is not a well-formed bearer token is a
401, whatever bytes it holds."""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from elasticityops.api.console import session
from elasticityops.background import wait_set
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Forbidden, TemporaryError, Unauthorized
from elasticityops.domain.ports import TokenStore
from elasticityops.domain.tokens import ApiToken, Scope, check_token_name

HOW_TO_GET_ONE = (
    "send 'Authorization: Bearer TOKEN' with the admin token `eops serve` printed, "
    "or create one with `eops token create --data-dir DIR`"
)

bearer = HTTPBearer(auto_error=False, description="an API token from `eops token create`")

# How long this process trusts a token it has read from the store without reading it again: a
# token revoked by another process (`eops token revoke`, another gateway on the same database)
# stops working here within this many seconds; one revoked through this process's API, at once.
CACHE_SECONDS = 5.0
_CACHE_MAX = 10_000
# How often a request held open (an event stream, a log follow, a ?wait) looks at its token
# again: one revoked by another process ends it within CACHE_SECONDS + this; one revoked through
# this process's API ends it at once, and one that expires at its expiry (`until_invalid`).
RECHECK_SECONDS = 1.0

# RFC 6750 `b64token` (RFC 9110 token68): the only bytes a bearer token can hold.
_TOKEN68 = re.compile(rb"[A-Za-z0-9\-._~+/]+=*")
_BEARER = re.compile(rb"[Bb][Ee][Aa][Rr][Ee][Rr] +(.+?) *")


def new_api_token() -> str:
    return "eops_" + secrets.token_urlsafe(32)


async def new_token(
    store: TokenStore,
    name: str,
    clock: Clock,
    *,
    scope: Scope = Scope.admin,
    lifetime: timedelta | None = None,
) -> tuple[str, ApiToken]:
    """A new API token (shown once: only its hash is kept) and what the store knows of it."""
    check_token_name(name)
    token = new_api_token()
    now = clock.now()
    expires_at = None if lifetime is None else now + lifetime
    record = await store.create_api_token(name, hash_token(token), now, scope=scope, expires_at=expires_at)
    return token, record


def hash_token(token: str | bytes) -> str:
    raw = token if isinstance(token, bytes) else token.encode()
    return hashlib.sha256(raw).hexdigest()


def header_bytes(value: str | None) -> bytes:
    """A header as it came off the wire: ASGI servers hand headers over as bytes and Starlette
    decodes them as latin-1, so this is exact for what a request carries (and never raises for
    a str that came from elsewhere)."""
    if value is None:
        return b""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def header_digest(authorization: str | None) -> str:
    """The sha256 of the bearer token of a raw Authorization header; Unauthorized without one."""
    token = bearer_token(authorization)
    if not token:
        raise Unauthorized(f"missing bearer token: {HOW_TO_GET_ONE}")
    return hash_token(token)


def bearer_token(authorization: str | None) -> bytes | None:
    """The token of an `Authorization: Bearer TOKEN` header, as bytes; None when there is no
    header or another scheme. Raises Unauthorized for a bearer header whose token holds bytes
    no token can (non-ASCII, control characters, spaces inside)."""
    raw = header_bytes(authorization).strip(b" \t")
    if not raw:
        return None
    match = _BEARER.fullmatch(raw)
    if match is None:
        return None
    token = match[1]
    if _TOKEN68.fullmatch(token) is None:
        raise Unauthorized(f"the bearer token is malformed (not a token's characters): {HOW_TO_GET_ONE}")
    return token


@dataclass(frozen=True)
class _Cached:
    token: ApiToken
    until: float  # on the clock's monotonic scale


class TokenChecker:
    """Tells a valid token from any other bytes. A token read from the store is trusted for
    `ttl` seconds (and never past its expiry) without another read; `forget` drops a revoked
    one at once. Misses always ask the store, so a token made by `eops token create` in another
    process works at once."""

    def __init__(self, store: TokenStore, clock: Clock, ttl: float = CACHE_SECONDS) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._valid: dict[str, _Cached] = {}
        self._generation = 0  # bumped by forget: a read that raced a revoke is not cached
        self._reading: dict[str, asyncio.Future[ApiToken | None]] = {}
        self._forgotten = asyncio.Event()  # set (and replaced) by each forget

    async def check(self, token: bytes) -> ApiToken | None:
        """The valid, unexpired token these bytes are, or None."""
        return await self.check_hash(hash_token(token))

    async def check_hash(self, digest: str) -> ApiToken | None:
        """The valid, unexpired token of this sha256 (a console session's), or None."""
        hit = self._valid.get(digest)
        if hit is not None:
            fresh = hit.until > self._clock.monotonic()
            if fresh and (hit.token.expires_at is None or not hit.token.expired(self._clock.now())):
                return hit.token
            del self._valid[digest]
        # One read per token at a time: when a cached token's time is up, every request then in
        # flight with it (64 at once in bench/gateway_accept.py) would otherwise queue its own
        # read on the store's one read thread, and the loop stalled ~150 ms every few seconds.
        reading = self._reading.get(digest)
        if reading is None:
            reading = asyncio.ensure_future(self._read(digest))
            self._reading[digest] = reading
            reading.add_done_callback(lambda _: self._reading.pop(digest, None))
        return await asyncio.shield(reading)

    async def _read(self, digest: str) -> ApiToken | None:
        generation = self._generation
        found = await self._store.check_api_token(digest)
        if found is None or found.expired(self._clock.now()):
            return None
        if generation == self._generation:
            if len(self._valid) >= _CACHE_MAX:
                self._valid.clear()
            self._valid[digest] = _Cached(found, self._clock.monotonic() + self._ttl)
        return found

    def now(self) -> datetime:
        return self._clock.now()

    def forget(self, token_id: str) -> None:
        """Stop trusting the token with this id (it was revoked) from now on."""
        self._generation += 1
        for digest in [d for d, cached in self._valid.items() if cached.token.id == token_id]:
            del self._valid[digest]
        # Whoever holds a request open with a token looks again now (`until_invalid`).
        self._forgotten.set()
        self._forgotten = asyncio.Event()

    async def until_invalid(self, digest: str) -> None:
        """Returns once the token of this sha256 no longer checks: at once when this process
        revokes it (`forget`), at its expiry, and within CACHE_SECONDS + RECHECK_SECONDS when
        another process does. A store that is away meanwhile ends nothing: it is asked again."""
        while True:
            try:
                found = await self.check_hash(digest)
            except TemporaryError:
                await asyncio.sleep(RECHECK_SECONDS)
                continue
            if found is None:
                return
            wait = RECHECK_SECONDS
            if found.expires_at is not None:
                wait = min(wait, max(0.0, (found.expires_at - self._clock.now()).total_seconds()))
            await wait_set(self._forgotten, wait)

    async def require(self, digest: str, needed: Scope = Scope.invoke) -> ApiToken:
        """The token of this sha256 (`header_digest`), if valid and its scope allows `needed`."""
        return self.allowed(await self.check_hash(digest), needed)

    def allowed(self, found: ApiToken | None, needed: Scope) -> ApiToken:
        """`found` if it is a token whose scope allows `needed`; else the 401 or 403 saying why."""
        if found is None:
            raise Unauthorized(
                f"the bearer token is not valid here (unknown, revoked or expired): {HOW_TO_GET_ONE}"
            )
        if not found.scope.allows(needed):
            raise Forbidden(
                f"token {found.id} ({found.name!r}) has scope {found.scope.value}; this needs scope "
                f"{needed.value} (create one with `eops token create --scope {needed.value}`)"
            )
        return found


# The routes an `invoke` token may use, as (method, route name: the endpoint function's name,
# what FastAPI puts in the request's scope whatever prefix the router is included under). Every
# other /v1 route needs `admin` (deploy and delete functions, tokens), so a route added without
# a line here is admin-only until someone decides otherwise (tests/api/test_tokens.py tries
# every route of the OpenAPI document with an invoke token).
INVOKE_ROUTES = frozenset(
    {
        ("POST", "invoke"),  # POST /v1/functions/{name}/invocations (invocations_routes.accept_route)
        ("GET", "list_functions"),  # GET /v1/functions
        ("GET", "get_function"),  # GET /v1/functions/{name}
        ("GET", "list_invocations"),  # GET /v1/invocations
        ("GET", "get_invocation"),  # GET /v1/invocations/{invocation_id}
        ("GET", "logs"),  # GET /v1/invocations/{invocation_id}/logs
        ("POST", "cancel"),  # POST /v1/invocations/{invocation_id}/cancel
        ("GET", "invocation_webhooks"),  # GET /v1/invocations/{invocation_id}/webhooks
        ("GET", "events"),  # GET /v1/events (the console's live updates)
        ("GET", "get_capacity"),  # GET /v1/capacity
        ("POST", "invoke_batch"),  # POST /v1/functions/{name}/invocations:batch
        ("GET", "get_batch"),  # GET /v1/batches/{batch_id}
        ("GET", "batch_events"),  # GET /v1/batches/{batch_id}/events
        ("POST", "cancel_batch"),  # POST /v1/batches/{batch_id}:cancel
    }
)


def needed_scope(method: str, route_name: str) -> Scope:
    method = "GET" if method == "HEAD" else method
    return Scope.invoke if (method, route_name) in INVOKE_ROUTES else Scope.admin


async def require_api_token(
    request: Request, _credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> ApiToken:
    """The dependency on every /v1 route (the security scheme comes from `bearer`; the header
    is read here, as bytes). Without an Authorization header, a console session cookie stands
    for its token (api/console/session.py). The token's sha256 is kept on the request too
    (`token_digest`): what a request holds open ends with its token (api/held_open.py)."""
    runtime = request.app.state.runtime
    needed = needed_scope(request.method, getattr(request.scope.get("route"), "name", ""))
    token, digest = await caller_token(request, runtime.server_secret, runtime.tokens, needed)
    request.state.api_token = token
    request.state.token_digest = digest
    return token


async def caller_token(
    request: Request, server_secret: bytes, checker: TokenChecker, needed: Scope
) -> tuple[ApiToken, str]:
    """The token a request comes with and its sha256: by its Authorization header, or, without
    one, by the console's session cookie (and its CSRF header on what changes something). The
    one rule for every /v1 route, the hand-written accept route included."""
    authorization = request.headers.get("authorization")
    cookie = request.cookies.get(session.COOKIE) if authorization is None else None
    if cookie:
        return await session_token(request, server_secret, checker, cookie, needed)
    digest = header_digest(authorization)
    return await checker.require(digest, needed), digest


def token_digest(request: Request) -> str:
    """The sha256 of the token a /v1 request came with (set by `require_api_token`)."""
    digest: str = request.state.token_digest
    return digest


async def session_token(
    request: Request, server_secret: bytes, checker: TokenChecker, cookie: str, needed: Scope
) -> tuple[ApiToken, str]:
    """The token a console session cookie stands for, and its sha256, checked as the token
    itself would be, and for a request that changes something, the CSRF header too."""
    key = session.session_key(server_secret)
    digest = session.read_cookie(key, cookie, checker.now())
    if digest is None:
        raise Unauthorized("the console session is over (expired or not this gateway's): log in again at /ui")
    if request.method not in session.SAFE_METHODS and not session.csrf_ok(
        key, cookie, request.headers.get(session.CSRF_HEADER)
    ):
        raise Forbidden(
            f"a request made with the console's session cookie that changes something needs the "
            f"{session.CSRF_HEADER} header the console sets; send the token as 'Authorization: Bearer "
            "TOKEN' instead from anything but the console"
        )
    found = await checker.check_hash(digest)
    if found is None:
        raise Unauthorized("the console session's token is revoked or expired: log in again at /ui")
    return checker.allowed(found, needed), digest
