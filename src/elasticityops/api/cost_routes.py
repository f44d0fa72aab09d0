"""/v1/cost: node-seconds and their cost over a time range, per function, per hour and/or per
capacity (spot, on-demand, local), as JSON or CSV (`Accept: text/csv` or `?format=csv`); and
the cost of one invocation, for GET /v1/invocations/{id}."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Query, Request, Response

from elasticityops.api.query import aware_time
from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.node_seconds import (
    GROUPINGS,
    CostGroup,
    InvocationCost,
    Phase,
    attempt_spans,
    invocation_cost,
    live_attempt,
)
from elasticityops.domain.tokens import parse_lifetime
from elasticityops.pricing.table import capacity_of_backend, prices
from elasticityops.wire import CostGroupOut, CostReportOut, ErrorOut, phases_document

router = APIRouter(tags=["cost"])

# The longest range one report sums: its rows are the ledger's hours in it, so this bounds the
# work of one request (a year of hours per function is ~9,000 groups).
MAX_RANGE = timedelta(days=366)
_CSV = "text/csv"


async def cost_of(rt: Runtime, inv: Invocation) -> InvocationCost:
    stored = await rt.store.node_seconds_of(inv.id)
    times = live_attempt(inv)
    now = rt.clock.now()
    live = [] if times is None else attempt_spans(times, now)
    capacity = inv.node_capacity or capacity_of_backend(rt.settings.backend)
    return invocation_cost(stored, live, prices().per_hour(inv.gpu_type, capacity), as_of=now)


@router.get(
    "/cost",
    response_model=CostReportOut,
    responses={
        200: {"content": {_CSV: {"schema": {"type": "string"}}}, "description": "the report (JSON or CSV)"},
        401: {"model": ErrorOut, "description": "missing or wrong token"},
        422: {"model": ErrorOut, "description": "invalid input; each problem names the field and the fix"},
    },
    summary="Node-seconds and cost by phase, per function, hour, capacity and/or cluster",
)
async def cost_report(
    request: Request,
    since: str = Query("24h", max_length=40, description="how far back: 90m, 24h, 7d, or an ISO 8601 time"),
    by: list[str] = Query(
        [],
        description="group by function, hour, capacity and/or cluster (repeat for more than one); "
        "none: one total",
    ),
    format: str | None = Query(None, description="csv for CSV (or send Accept: text/csv)"),
) -> Response:
    rt: Runtime = request.app.state.runtime
    now = rt.clock.now()
    start = _since(since, now)
    keys = _by(by)
    groups = await rt.store.cost_report(start, now, keys)
    wants_csv = format == "csv" or (format is None and _CSV in request.headers.get("accept", ""))
    if format not in (None, "csv", "json"):
        raise InvalidInput([FieldProblem("format", f"{format!r} is not a format", "pass csv or json")])
    if wants_csv:
        # A file name, so that a link to this URL (the console's download, which the session
        # cookie authenticates) saves a file named for its range rather than "cost".
        disposition = f'attachment; filename="{csv_filename(start, now, keys)}"'
        return Response(
            content=report_csv(groups, keys), media_type=_CSV, headers={"Content-Disposition": disposition}
        )
    report = CostReportOut(
        since=start,
        until=now,
        by=list(keys),
        groups=[_group_out(g) for g in groups],
        total_node_seconds=sum(g.seconds for g in groups),
        usd=sum(g.usd for g in groups),
        unpriced_node_seconds=sum(g.unpriced_seconds for g in groups),
    )
    return Response(content=report.model_dump_json(), media_type="application/json")


def _since(raw: str, now: datetime) -> datetime:
    """A duration back from now (24h, 7d: the tokens' duration syntax), or an aware ISO time;
    from 1 s to MAX_RANGE back, the one range this field has (its message says that one)."""
    shortest, longest = "1s", f"{MAX_RANGE.days}d"
    if raw[:1].isdigit() and raw.strip()[-1:].isalpha() and "T" not in raw:
        try:
            start = now - parse_lifetime(raw, "since")
        except InvalidInput:  # out of the tokens' range, or not a duration: say this field's
            problem = f"{raw!r} is not a duration from {shortest} to {longest}"
            raise InvalidInput([FieldProblem("since", problem, "pass e.g. 90m, 24h or 7d")]) from None
    else:
        fix = "pass a duration (90m, 24h, 7d) or a time with its zone (2026-12-01T00:00:00Z)"
        start = aware_time(raw, "since", fix, expected="a duration or a time")
    if start >= now:
        problem = f"{raw!r} is not in the past (now is {now.isoformat()})"
        raise InvalidInput([FieldProblem("since", problem, "pass a time before now, or a duration")])
    if now - start > MAX_RANGE:
        problem = f"{raw!r} is more than {MAX_RANGE.days} days back"
        raise InvalidInput([FieldProblem("since", problem, f"ask for a shorter range, at most {longest}")])
    return start


def _by(raw: list[str]) -> tuple[str, ...]:
    names = [part.strip() for item in raw for part in item.split(",") if part.strip()]
    bad = [n for n in names if n not in GROUPINGS]
    if bad:
        fix = "pass function, hour, capacity and/or cluster"
        raise InvalidInput([FieldProblem("by", f"{bad[0]!r} is not a grouping", fix)])
    return tuple(name for name in GROUPINGS if name in names)  # one order, whatever was asked


def _group_out(group: CostGroup) -> CostGroupOut:
    return CostGroupOut(
        function=group.function,
        hour=group.hour,
        capacity=None if group.capacity is None else group.capacity.value,
        cluster=group.cluster,
        node_seconds=phases_document(group.phases),
        total_node_seconds=group.seconds,
        usd=group.usd,
        unpriced_node_seconds=group.unpriced_seconds,
    )


def csv_filename(start: datetime, until: datetime, keys: tuple[str, ...]) -> str:
    """eops-cost-20261201T0600Z-20261202T0600Z-function-hour.csv: only [A-Za-z0-9.-], so
    the name needs no quoting rules beyond the header's own quotes."""
    stamp = "%Y%m%dT%H%MZ"
    parts = ["eops-cost", start.astimezone(UTC).strftime(stamp), until.astimezone(UTC).strftime(stamp), *keys]
    return "-".join(parts) + ".csv"


def report_csv(groups: list[CostGroup], keys: tuple[str, ...]) -> str:
    """One line per group: its keys, each phase's node-seconds, the total, the cost."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    phases = [phase.value for phase in Phase]
    writer.writerow([*keys, *(f"{p}_s" for p in phases), "total_s", "usd", "unpriced_s"])
    for group in groups:
        named = {
            "function": group.function,
            "hour": None if group.hour is None else group.hour.isoformat(),
            "capacity": None if group.capacity is None else group.capacity.value,
            "cluster": group.cluster,
        }
        seconds = phases_document(group.phases)
        writer.writerow(
            [
                *(named[k] for k in keys),
                *(f"{seconds[p]:.3f}" for p in phases),
                f"{group.seconds:.3f}",
                f"{group.usd:.6f}",
                f"{group.unpriced_seconds:.3f}",
            ]
        )
    return out.getvalue()
