"""/healthz and /readyz: unauthenticated, for probes; /metrics, for Prometheus: open, or behind
the scrape token `EOPS_METRICS_TOKEN` when one is set (it exports cost by function, which
/v1/cost shows to admins only; docs/security.md)."""

from __future__ import annotations

import asyncio
import hmac

import orjson
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from elasticityops.api.auth import bearer_token, hash_token
from elasticityops.api.console.capacity import gpu_node_states
from elasticityops.api.errors import error_response
from elasticityops.api.runtime import Runtime
from elasticityops.catalog.gpus_in_use import gpus_in_use
from elasticityops.domain.admission import gpus_free
from elasticityops.domain.budget import room_by_type
from elasticityops.domain.errors import EopsError, Unauthorized
from elasticityops.domain.ports import CountsClientFaults
from elasticityops.domain.tokens import Scope
from elasticityops.headroom.controller import status_rows
from elasticityops.wire import ErrorOut

router = APIRouter(tags=["operations"])
_READY_TIMEOUT_S = 2.0


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


_READY_DOC = (
    "Ready to serve. `role` says what this replica does: `leader` (it runs the dispatcher and the "
    "headroom controller; a single gateway always is) or `follower` (one of several replicas with "
    "--leader-elect: it serves the API while the leader dispatches); with leader election, "
    "`leader` is the identity holding the Lease as this replica last saw it."
)


@router.get(
    "/readyz",
    summary="The store answers, and on the leader the dispatcher runs",
    responses={
        200: {
            "description": _READY_DOC,
            "content": {
                "application/json": {
                    "examples": {
                        "single gateway": {"value": {"status": "ready", "role": "leader"}},
                        "follower": {
                            "value": {"status": "ready", "role": "follower", "leader": "eops-7c9f-2xk4p"}
                        },
                    }
                }
            },
        },
        503: {
            "model": ErrorOut,
            "description": "not ready: the store does not answer, or the leader's dispatcher is "
            "starting or stopping; the message says which",
        },
    },
)
async def readyz(request: Request) -> Response:
    rt = _runtime(request)
    try:
        await asyncio.wait_for(rt.store.ping(), _READY_TIMEOUT_S)
    except (TimeoutError, EopsError) as exc:
        return error_response(503, "not_ready", f"the store does not answer: {exc}")
    body: dict[str, str] = {"status": "ready", "role": rt.role}
    if rt.election is not None:
        body["leader"] = rt.leader
    if rt.role == "leader" and not rt.dispatcher.running:
        return error_response(503, "not_ready", "the dispatcher is not running (starting or stopping)")
    return Response(content=orjson.dumps(body), media_type="application/json")


_SCRAPE_NEEDS = (
    "/metrics needs the scrape token: send 'Authorization: Bearer TOKEN' with the gateway's "
    "EOPS_METRICS_TOKEN (Prometheus: the scrape config's authorization.credentials; the chart: "
    "metrics.tokenSecret), or an admin API token"
)


async def _check_scraper(request: Request, rt: Runtime) -> None:
    """Nothing without a scrape token; with one, the request carries it or an admin API token."""
    expected = rt.settings.api.metrics_token
    if not expected:
        return
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise Unauthorized(_SCRAPE_NEEDS)
    if hmac.compare_digest(token, expected.encode()):
        return
    found = await rt.tokens.check_hash(hash_token(token))
    if found is None or not found.scope.allows(Scope.admin):
        raise Unauthorized(
            f"the bearer token is neither the scrape token nor an admin token: {_SCRAPE_NEEDS}"
        )


_METRICS_DOC = (
    "Prometheus' text format. Open unless the gateway has a scrape token (EOPS_METRICS_TOKEN): then "
    "it answers 401 without 'Authorization: Bearer' and that token or an admin API token."
)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description=_METRICS_DOC,
    response_class=Response,
    responses={401: {"model": ErrorOut, "description": "a scrape token is set and was not sent"}},
)
async def metrics(request: Request) -> Response:
    rt = _runtime(request)
    await _check_scraper(request, rt)
    counts = await rt.store.counts_by_state()
    # Counted per function (one GROUP BY), not read row by row: a scrape at the peak's 4,000
    # running invocations would otherwise decode all of them.
    in_use = await gpus_in_use(rt.store, rt.functions)
    free = gpus_free(in_use, rt.settings.dispatch.gpu_budget, rt.backend.free_gpus())
    budget_free = room_by_type(rt.settings.dispatch.gpu_budget, in_use, {})
    pools = status_rows(rt.headroom.pools) if rt.headroom is not None else []
    client = rt.backend.client_counters() if isinstance(rt.backend, CountsClientFaults) else None
    rt.metrics.node_seconds.totals = await rt.store.node_seconds_totals()
    rt.metrics.webhooks_pending.set(await rt.store.webhooks_pending())
    own, workers = gpu_node_states(rt.backend)
    # The leader's watch only: a follower's holds nothing, and its zeros would read as no nodes.
    nodes = None if own is None or rt.role != "leader" else {"": own, **workers}
    body = rt.metrics.render(
        counts, in_use, free, budget_free, pools, leader=rt.role == "leader", client=client, nodes=nodes
    )
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
