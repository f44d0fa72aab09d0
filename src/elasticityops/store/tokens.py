"""API tokens in SQL, kept by their hash only (the token itself is never stored); a token's id
derives from its hash."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.engine import RowMapping

from elasticityops.domain.tokens import TOKEN_ID_PREFIX, ApiToken, Scope, is_token_id, token_id
from elasticityops.store.database import Database
from elasticityops.store.tables import api_tokens


class SqlTokens(Database):
    """The TokenStore of the port (domain/ports/store.py)."""

    async def create_api_token(
        self,
        name: str,
        token_hash: str,
        at: datetime,
        *,
        scope: Scope = Scope.admin,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        def run(conn: Connection) -> None:
            conn.execute(
                insert(api_tokens).values(
                    token_hash=token_hash, name=name, created_at=at, scope=scope.value, expires_at=expires_at
                )
            )

        await self._write(run)
        return ApiToken(token_id(token_hash), name, scope, at, expires_at)

    async def check_api_token(self, token_hash: str) -> ApiToken | None:
        """The token with this hash, expired or not (the caller decides): None when unknown."""

        def run(conn: Connection) -> ApiToken | None:
            query = select(*_TOKEN_COLUMNS).where(api_tokens.c.token_hash == token_hash)
            row = conn.execute(query).mappings().first()
            return None if row is None else _api_token(row)

        return await self._read(run)

    async def list_api_tokens(self) -> list[ApiToken]:
        def run(conn: Connection) -> list[ApiToken]:
            query = select(*_TOKEN_COLUMNS).order_by(api_tokens.c.created_at, api_tokens.c.token_hash)
            return [_api_token(row) for row in conn.execute(query).mappings()]

        return await self._read(run)

    async def revoke_api_token(self, id_: str) -> bool:
        """Delete the token with this id; False when there is none."""
        if not is_token_id(id_):
            return False
        prefix = id_.removeprefix(TOKEN_ID_PREFIX)

        def run(conn: Connection) -> bool:
            done = conn.execute(delete(api_tokens).where(api_tokens.c.token_hash.startswith(prefix)))
            return bool(done.rowcount)

        return await self._write(run)


_TOKEN_COLUMNS = [api_tokens.c[name] for name in ("token_hash", "name", "scope", "created_at", "expires_at")]


def _api_token(row: RowMapping) -> ApiToken:
    return ApiToken(
        id=token_id(row["token_hash"]),
        name=row["name"],
        scope=Scope(row["scope"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )
