"""Bearer-token authentication: API tokens are stored as sha256 hashes, never in clear."""

from __future__ import annotations

import hashlib
import secrets

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from elasticityops.domain.errors import Unauthorized
from elasticityops.domain.ports import Store

HOW_TO_GET_ONE = (
    "send 'Authorization: Bearer TOKEN' with the admin token `eops serve` printed, "
    "or create one with `eops token create --data-dir DIR`"
)

bearer = HTTPBearer(auto_error=False, description="an API token from `eops token create`")


def new_api_token() -> str:
    return "eops_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenChecker:
    """Remembers tokens it has seen valid: tokens cannot be revoked yet, so a hit needs no
    database read. Misses always ask the store, so a token made by `eops token create` in
    another process works at once."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._valid: set[str] = set()

    async def is_valid(self, token: str) -> bool:
        digest = hash_token(token)
        if digest in self._valid:
            return True
        if await self._store.check_api_token(digest):
            self._valid.add(digest)
            return True
        return False

    async def require(self, credentials: HTTPAuthorizationCredentials | None) -> None:
        if credentials is None or not credentials.credentials:
            raise Unauthorized(f"missing bearer token: {HOW_TO_GET_ONE}")
        if not await self.is_valid(credentials.credentials):
            raise Unauthorized(f"the bearer token is not valid here: {HOW_TO_GET_ONE}")

    async def require_header(self, authorization: str | None) -> None:
        """The same check on the raw header, for routes that skip dependency injection."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(f"missing bearer token: {HOW_TO_GET_ONE}")
        if not await self.is_valid(token.strip()):
            raise Unauthorized(f"the bearer token is not valid here: {HOW_TO_GET_ONE}")


async def require_api_token(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> None:
    checker: TokenChecker = request.app.state.runtime.tokens
    await checker.require(credentials)
