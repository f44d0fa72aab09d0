"""Completion webhooks over HTTP: rotate a function's signing secret, and read how the delivery
of an invocation's messages went."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request

from elasticityops.api.runtime import Runtime
from elasticityops.api.waiting import get_or_404
from elasticityops.api.webhook_params import fresh_secret
from elasticityops.domain.errors import NotFound
from elasticityops.domain.tokens import ApiToken, Scope
from elasticityops.domain.webhook_delivery import Delivery
from elasticityops.wire import (
    ErrorOut,
    WebhookDeliveryList,
    WebhookDeliveryOut,
    WebhookSecretOut,
    hidden_webhook_url,
)

router = APIRouter(tags=["webhooks"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "missing or wrong token"},
    404: {"model": ErrorOut, "description": "no such function or invocation"},
}


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.post(
    "/functions/{name}/webhook-secret:rotate",
    response_model=WebhookSecretOut,
    responses=_ERRORS,
    summary="Rotate a function's webhook signing secret",
    description="Makes a new secret and answers it, this once; every delivery attempt from now "
    "on (messages already waiting too) is signed with it. Admin scope.",
)
async def rotate_webhook_secret(
    request: Request, name: str = Path(description="the function's name", max_length=200)
) -> WebhookSecretOut:
    rt = _runtime(request)
    if await rt.store.get_function(name) is None:
        raise NotFound(f"no function named {name!r}; list them with GET /v1/functions (eops fn ls)")
    secret = fresh_secret()
    await rt.store.rotate_webhook_secret(name, secret, rt.clock.now())
    return WebhookSecretOut(function=name, webhook_secret=secret)


@router.get(
    "/invocations/{invocation_id}/webhooks",
    response_model=WebhookDeliveryList,
    responses=_ERRORS,
    summary="An invocation's webhook messages and their delivery",
    description="Each message its webhook was sent (or is to be sent), in order: its webhook-id, "
    "type, attempts, the last answer or error, and when it was delivered, failed or is tried next.",
)
async def invocation_webhooks(
    request: Request, invocation_id: str = Path(description="invocation id (inv-...)", max_length=100)
) -> WebhookDeliveryList:
    rt = _runtime(request)
    await get_or_404(rt, invocation_id)
    deliveries = await rt.store.webhook_deliveries(invocation_id)
    token: ApiToken = request.state.api_token
    # As a function's read shows it (wire.FunctionOut): a URL is often its receiver's credential.
    full = token.scope.allows(Scope.admin)
    return WebhookDeliveryList(items=[_out(d, full) for d in deliveries])


def _out(delivery: Delivery, full_url: bool) -> WebhookDeliveryOut:
    message, state = delivery.message, delivery.state
    return WebhookDeliveryOut(
        id=message.webhook_id,
        type=message.message_type,
        url=message.url if full_url else hidden_webhook_url(message.url),
        created_at=message.created_at,
        attempts=state.attempts,
        last_status=state.last_status,
        last_error=state.last_error,
        delivered_at=state.delivered_at,
        failed_at=state.failed_at,
        next_attempt_at=state.next_attempt_at,
    )
