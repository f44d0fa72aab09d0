"""/healthz, /readyz and /metrics: unauthenticated, for probes and Prometheus."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from elasticityops.api.errors import error_response
from elasticityops.api.runtime import Runtime
from elasticityops.dispatch.functions import gpus_in_use
from elasticityops.domain.admission import gpus_free
from elasticityops.domain.budget import room_by_type
from elasticityops.domain.errors import EopsError
from elasticityops.elasticity.controller import status_rows
from elasticityops.wire import ErrorOut

router = APIRouter(tags=["operations"])
_READY_TIMEOUT_S = 2.0


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The store answers and the dispatcher runs",
    responses={503: {"model": ErrorOut, "description": "not ready; the message says what is missing"}},
)
async def readyz(request: Request) -> Response:
    rt = _runtime(request)
    try:
        await asyncio.wait_for(rt.store.ping(), _READY_TIMEOUT_S)
    except (TimeoutError, EopsError) as exc:
        return error_response(503, "not_ready", f"the store does not answer: {exc}")
    if not rt.dispatcher.running:
        return error_response(503, "not_ready", "the dispatcher is not running (starting or stopping)")
    return Response(content=b'{"status":"ready"}', media_type="application/json")


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    rt = _runtime(request)
    counts = await rt.store.counts_by_state()
    # Counted per function (one GROUP BY), not read row by row: a scrape at the peak's 4,000
    # running invocations would otherwise decode all of them.
    in_use = await gpus_in_use(rt.store, rt.functions)
    free = gpus_free(in_use, rt.settings.dispatch.gpu_budget, rt.backend.free_gpus())
    budget_free = room_by_type(rt.settings.dispatch.gpu_budget, in_use, {})
    pools = status_rows(rt.headroom.pools) if rt.headroom is not None else []
    body = rt.metrics.render(counts, in_use, free, budget_free, pools)
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
