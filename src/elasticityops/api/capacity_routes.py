"""/v1/capacity: the console's capacity page, from what this gateway knows now (api/console/capacity.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fastapi import APIRouter, Query, Request

from elasticityops.api.console.capacity import Capacity, Sample, gather
from elasticityops.api.query import aware_time
from elasticityops.api.runtime import Runtime
from elasticityops.catalog.gpus_in_use import gpus_in_use_by_cluster
from elasticityops.headroom.controller import status_rows
from elasticityops.wire import CapacityOut, CapacitySampleOut, ErrorOut, HeadroomPoolOut, QueueHeadOut

router = APIRouter(tags=["console"])


async def read_capacity(rt: Runtime) -> Capacity:
    return await gather(
        rt.store, rt.functions, rt.backend, rt.settings.dispatch.gpu_budget, rt.headroom, rt.clock
    )


def sample_out(sample: Sample) -> CapacitySampleOut:
    return CapacitySampleOut(
        at=sample.at,
        demand=sample.demand,
        in_use=sample.in_use,
        queued=sample.queued,
        nodes=sample.nodes,
        headroom_held=sample.headroom_held,
        headroom_busy=sample.headroom_busy,
    )


def capacity_out(
    now: Capacity,
    rt: Runtime,
    since: datetime | None = None,
    by_cluster: Mapping[str, Mapping[str, int]] | None = None,
) -> CapacityOut:
    """`by_cluster`: GPUs in use per MultiKueue worker and type (the page's, not the history's:
    the samples never read it)."""
    budget = now.budget
    types = sorted({*now.in_use, *(k for k, _ in budget.per_type)} if budget else set(now.in_use))
    head = now.head
    return CapacityOut(
        at=now.at,
        role=rt.role,
        budget=None if budget is None else budget.render(),
        budget_by_type={t: None if budget is None else budget.cap(t) for t in types},
        budget_total=None if budget is None else budget.total,
        in_use=dict(now.in_use),
        in_use_total=sum(now.in_use.values()),
        in_use_by_cluster={cluster: dict(types) for cluster, types in (by_cluster or {}).items()},
        states={s.value: n for s, n in now.states.items()},
        queue_length=now.queued,
        queue_head=None
        if head is None
        else QueueHeadOut(
            id=head.id,
            function=head.function,
            priority=head.priority.value,
            accepted=head.timeline.accepted,
            waiting_s=max(0.0, (now.at - head.timeline.accepted).total_seconds()),
        ),
        headroom=None
        if now.headroom is None
        else [HeadroomPoolOut.model_validate(row) for row in status_rows(now.headroom)],
        nodes=None if now.nodes is None else dict(now.nodes),
        nodes_by_cluster={cluster: dict(states) for cluster, states in now.nodes_by_cluster.items()},
        free_gpus=now.slots[0],
        total_gpus=now.slots[1],
        history=[sample_out(s) for s in rt.history.samples if since is None or s.at > since],
        sample_s=rt.history.settings.sample_s,
        keep_s=rt.history.settings.keep_s,
    )


@router.get(
    "/capacity",
    response_model=CapacityOut,
    responses={
        401: {"model": ErrorOut, "description": "missing or wrong token"},
        422: {"model": ErrorOut, "description": "since is not a time with its zone"},
    },
    summary="Capacity now and over the last hours: GPUs against the budget, queue, headroom, nodes",
)
async def get_capacity(
    request: Request,
    since: str | None = Query(
        None,
        max_length=40,
        description="only the history samples taken after this time (ISO 8601 with its zone), "
        "e.g. the last sample's `at` of the previous answer: the console reads the whole "
        "history once, then only what is new",
    ),
) -> CapacityOut:
    rt: Runtime = request.app.state.runtime
    after = (
        None
        if since is None
        else aware_time(since, "since", "pass a sample's `at`, e.g. 2026-12-01T10:00:00Z")
    )
    by_cluster = await gpus_in_use_by_cluster(rt.store, rt.functions)
    return capacity_out(await read_capacity(rt), rt, after, by_cluster)
