"""/v1/tokens: list, create and revoke API tokens (scope admin only, see auth.INVOKE_ROUTES)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from elasticityops.api.auth import new_token
from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import NotFound
from elasticityops.domain.tokens import ApiToken, Scope, lifetime_seconds
from elasticityops.wire import ErrorOut

router = APIRouter(tags=["tokens"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "missing or wrong token"},
    403: {"model": ErrorOut, "description": "the token's scope is not admin"},
    422: {"model": ErrorOut, "description": "invalid input; each problem names the field and the fix"},
}


class TokenOut(BaseModel):
    id: str = Field(description="tok-...: what `eops token revoke` and DELETE /v1/tokens/{id} take")
    name: str
    scope: Scope
    created_at: datetime
    expires_at: datetime | None = Field(None, description="null: never expires")

    @classmethod
    def of(cls, token: ApiToken) -> TokenOut:
        return cls(
            id=token.id,
            name=token.name,
            scope=token.scope,
            created_at=token.created_at,
            expires_at=token.expires_at,
        )


class TokenList(BaseModel):
    items: list[TokenOut]


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: `true` is no lifetime of 1 s and "10" no number (a caller's typo, taken as written).
    name: StrictStr = Field(
        "api", min_length=1, max_length=128, description="a label; need not be unique; printable characters"
    )
    scope: Scope = Field(Scope.invoke, description="admin: everything; invoke: invoke, read, cancel")
    expires_in_seconds: StrictInt | None = Field(
        None, ge=1, le=3650 * 86400, description="the token stops working this long after now"
    )


class TokenCreated(TokenOut):
    token: str = Field(description="the token itself, shown this once: only its hash is kept")


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.get("/tokens", response_model=TokenList, responses=_ERRORS, summary="List API tokens")
async def list_tokens(request: Request) -> TokenList:
    tokens = await _runtime(request).store.list_api_tokens()
    return TokenList(items=[TokenOut.of(t) for t in tokens])


@router.post(
    "/tokens",
    status_code=201,
    response_model=TokenCreated,
    responses=_ERRORS,
    summary="Create an API token",
    description="The answer holds the token itself, once; the gateway keeps only its hash.",
)
async def create_token(request: Request, body: TokenIn) -> TokenCreated:
    rt = _runtime(request)
    lifetime = None if body.expires_in_seconds is None else lifetime_seconds(body.expires_in_seconds)
    token, record = await new_token(rt.store, body.name, rt.clock, scope=body.scope, lifetime=lifetime)
    return TokenCreated(**TokenOut.of(record).model_dump(), token=token)


@router.delete(
    "/tokens/{token_id}",
    status_code=204,
    responses={**_ERRORS, 404: {"model": ErrorOut}},
    summary="Revoke an API token",
    description=(
        "It stops working at once on this gateway; another gateway on the same database stops "
        "trusting it within a few seconds (auth.CACHE_SECONDS)."
    ),
)
async def revoke_token(
    request: Request, token_id: str = Path(description="tok-... from GET /v1/tokens", max_length=40)
) -> Response:
    rt = _runtime(request)
    if not await rt.store.revoke_api_token(token_id):
        raise NotFound(f"no token {token_id!r}; list them with GET /v1/tokens (eops token ls)")
    rt.tokens.forget(token_id)
    return Response(status_code=204)
