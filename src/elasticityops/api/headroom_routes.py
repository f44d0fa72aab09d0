"""/v1/headroom: what the headroom controller holds warm (eops headroom)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import TemporaryError
from elasticityops.headroom.controller import status_rows
from elasticityops.wire import ErrorOut, HeadroomOut, HeadroomPoolOut

router = APIRouter(tags=["headroom"])


@router.get(
    "/headroom",
    response_model=HeadroomOut,
    responses={
        401: {"model": ErrorOut, "description": "missing or wrong token"},
        503: {
            "model": ErrorOut,
            "description": "this replica is a follower (--leader-elect); the message names the leader, "
            "which runs the headroom controller",
        },
    },
    summary="Warm capacity: the policy, and per shape what is wanted and held",
)
async def get_headroom(request: Request) -> HeadroomOut:
    rt: Runtime = request.app.state.runtime
    controller = rt.headroom
    if controller is None and rt.settings.headroom.enabled and rt.role == "follower":
        raise TemporaryError(
            f"this replica is a follower; the leader {rt.leader or '(none elected yet)'} runs the "
            "headroom controller: ask it, or ask again through the Service",
            retry_after=rt.settings.leader.retry_period_s,
        )
    if controller is None:
        return HeadroomOut(policy=rt.settings.headroom.headroom)
    return HeadroomOut(
        policy=rt.settings.headroom.headroom,
        mechanism=controller.units.mechanism,
        pools=[HeadroomPoolOut.model_validate(row) for row in status_rows(controller.pools)],
        syncs=controller.syncs,
        last_error=controller.last_error,
    )
