"""One policy after another on a real cluster: settle, namespace, gateway, function, replay,
drain, collect, clean up. What it computes is in the pure modules (and the small pure helpers
at the top); the rest is I/O."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.client import AsyncClient, ClientError
from elasticityops.devcluster.kwok_provider import T4_TYPE
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.errors import EopsError
from elasticityops.domain.functions import FunctionSpec, GpuSpec
from elasticityops.planner.trace import Trace
from elasticityops.rehearse import cluster
from elasticityops.rehearse.gateway import Gateway, GatewayFailed, await_ready, start_gateway
from elasticityops.rehearse.measure import (
    InvocationTimes,
    NodeSample,
    measured_metrics,
    run_end_s,
)
from elasticityops.rehearse.options import RehearseOptions
from elasticityops.rehearse.predict import Prediction
from elasticityops.rehearse.replay import Sent, replay
from elasticityops.rehearse.summary import PolicyRun
from elasticityops.wire import InvocationOut

FUNCTION = "rehearse"
DRAIN_POLL_S = 5.0
_PROVISIONING_S = KubernetesSettings().provisioning_timeout_seconds


def function_spec(trace: Trace) -> FunctionSpec:
    """The one function every request invokes: a T4 job whose run time each invocation sets."""
    longest = float(trace.duration_s.max()) if len(trace) else 0.0
    return FunctionSpec(
        name=FUNCTION,
        image="eops-rehearse:kwok",  # never pulled: kwok plays the pod
        command=["sleep", "from-annotation"],
        gpu=GpuSpec.model_validate({"type": T4_TYPE, "count": 1}),
        # The Job's deadline counts the wait for a node too (manifests.py), which the gateway
        # bounds by its provisioning timeout; kwok ends a pod up to a second after its run time.
        timeout_seconds=min(7 * 86_400, math.ceil(longest + _PROVISIONING_S) + 120),
        max_concurrency=min(100_000, max(1, len(trace))),
    )


def namespace_name(prefix: str, policy: str, token: str) -> str:
    """`{prefix}-{policy}-{token}` as a DNS-1123 label (at most 63 characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", policy.lower()).strip("-") or "policy"
    head = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-") or "rehearse"
    room = 63 - len(token) - 2
    name = f"{head}-{slug}"[:room].rstrip("-")
    return f"{name}-{token}"


def _seconds(at: datetime | None, origin_epoch: float) -> float | None:
    return None if at is None else at.timestamp() - origin_epoch


def times_of(inv: InvocationOut, arrival_s: float, origin_epoch: float) -> InvocationTimes:
    tl = inv.timeline
    return InvocationTimes(
        arrival_s=arrival_s,
        accepted_s=_seconds(tl.accepted, origin_epoch),
        started_s=_seconds(tl.started, origin_epoch),
        finished_s=_seconds(tl.finished, origin_epoch) if inv.state.terminal else None,
        state=inv.state.value,
    )


class Progress(Protocol):
    def phase(self, policy: str, text: str) -> None: ...

    def sent(self, policy: str, done: int, total: int) -> None: ...

    def ended(self, policy: str, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class Rehearsal:
    """What to rehearse: decided and checked before anything runs."""

    trace: Trace
    policies: tuple[str, ...]
    predictions: dict[str, Prediction | str]  # str: why there is none
    kubeconfig: Path
    baseline_nodes: int
    out: Path
    options: RehearseOptions


@dataclass
class PolicyRecord:
    run: PolicyRun
    invocations: list[InvocationTimes] = field(default_factory=list)
    samples: list[NodeSample] = field(default_factory=list)
    prediction: Prediction | None = None


async def rehearse(
    plan: Rehearsal,
    progress: Progress,
    records: list[PolicyRecord],
    clock: Clock | None = None,
) -> None:
    """Run the policies in turn, appending each one's record to `records` as it ends (so a
    caller interrupted half-way still has the policies done by then)."""
    clock = clock or SystemClock()
    # Its own API use is small: a node list every few seconds and a namespace per policy.
    settings = KubernetesSettings(kubeconfig=str(plan.kubeconfig), qps=50.0, burst=100, concurrency=8)
    api = KubeApi.connect(settings, clock)
    try:
        for policy in plan.policies:
            records.append(await _one_policy(api, plan, policy, progress, clock))
    finally:
        await api.close()


async def _one_policy(
    api: KubeApi, plan: Rehearsal, policy: str, progress: Progress, clock: Clock
) -> PolicyRecord:
    opts = plan.options
    predicted = plan.predictions.get(policy)
    prediction = predicted if isinstance(predicted, Prediction) else None
    note = predicted if isinstance(predicted, str) else ""
    progress.phase(policy, f"waiting for the cluster to scale back to {plan.baseline_nodes} GPU nodes")

    said = [-1]

    def waiting(count: int, waited: float) -> None:
        # Once a minute: scale-down takes minutes, and a line per poll would bury the rest.
        if int(waited // 60) != said[0]:
            said[0] = int(waited // 60)
            progress.phase(policy, f"{count} GPU nodes, waiting for {plan.baseline_nodes} ({waited:.0f} s)")

    settle_s, settled = await cluster.wait_for_baseline(
        api, clock, plan.baseline_nodes, opts.settle_timeout, waiting
    )
    namespace = namespace_name(opts.namespace_prefix, policy, secrets.token_hex(3))
    run = PolicyRun(
        policy,
        namespace,
        None,
        prediction.metrics if prediction else None,
        prediction_note=note,
        requests=len(plan.trace),
        settle_s=settle_s,
        settled=settled,
        extra={"planner_policy": prediction.name} if prediction else {},
    )
    record = PolicyRecord(run, prediction=prediction)
    gateway: Gateway | None = None
    try:
        progress.phase(policy, f"namespace {namespace}, starting the gateway")
        await cluster.create_namespace(api, namespace)
        gateway = start_gateway(plan.out / f"gateway-{namespace}", plan.kubeconfig, namespace, policy)
        await await_ready(gateway, opts.ready_timeout)
        async with AsyncClient(gateway.url, gateway.token) as client:
            await client.deploy_function(function_spec(plan.trace))
            await _replay_and_collect(api, client, plan, record, progress, clock)
    except (GatewayFailed, ClientError, EopsError) as exc:
        record.run = _with(record.run, error=f"{type(exc).__name__}: {exc}")
    finally:
        progress.phase(policy, f"cleaning up: gateway, namespace {namespace}")
        if gateway is not None:
            gateway.stop()
        with contextlib.suppress(EopsError):
            gone = await cluster.delete_namespace(api, namespace, clock)
            record.run.extra["namespace_deleted"] = gone
    return record


def _with(run: PolicyRun, **changes: Any) -> PolicyRun:
    return replace(run, **changes)


async def _replay_and_collect(
    api: KubeApi,
    client: AsyncClient,
    plan: Rehearsal,
    record: PolicyRecord,
    progress: Progress,
    clock: Clock,
) -> None:
    trace, opts, policy = plan.trace, plan.options, record.run.policy
    durations = trace.duration_s.tolist()
    arrivals = trace.arrival_s.tolist()
    ns = record.run.namespace
    origin_epoch = clock.now().timestamp()
    start_mono = clock.monotonic()
    stop = asyncio.Event()
    sampler = asyncio.create_task(
        cluster.sample_until(api, clock, origin_epoch, opts.sample_interval, stop, record.samples)
    )
    sent_count = 0

    async def send(index: int) -> str:
        annotations = {RUN_SECONDS_ANNOTATION: f"{durations[index]:.3f}"}
        # Each request's own run time on kwok; the idempotency key makes the call safe to retry.
        inv = await client.invoke(FUNCTION, None, idempotency_key=f"{ns}-{index}", annotations=annotations)
        return inv.id

    def on_sent(_: Sent) -> None:
        nonlocal sent_count
        sent_count += 1
        progress.sent(policy, sent_count, len(trace))

    try:
        progress.phase(policy, "replaying the trace in real time")
        sent = await replay(
            arrivals, send, clock, max_in_flight=opts.max_in_flight, failures=(ClientError,), on_sent=on_sent
        )
        index_of = {s.invocation_id: s.index for s in sent if s.invocation_id}
        last_end = max((a + d for a, d in zip(arrivals, durations, strict=True)), default=0.0)
        deadline = start_mono + last_end + opts.drain_timeout
        progress.phase(policy, "waiting for every invocation to end")
        listed = await _drain(client, len(index_of), deadline, policy, progress, clock)
    finally:
        stop.set()
        await sampler
    invocations = [
        times_of(inv, arrivals[index_of[inv.id]], origin_epoch) for inv in listed if inv.id in index_of
    ]
    end_s = run_end_s(invocations, clock.monotonic() - start_mono)
    if opts.measure_until == "last-arrival":
        end_s = min(end_s, trace.span_s)
    record.invocations = invocations
    record.run = _with(
        record.run,
        measured=measured_metrics(invocations, record.samples, end_s, opts.warmup),
        send_failures=sum(1 for s in sent if s.invocation_id is None),
        late_sends=sum(1 for s in sent if s.late),
        not_started=sum(1 for i in invocations if i.started_s is None),
        not_finished=sum(1 for i in invocations if i.finished_s is None),
        extra={
            **record.run.extra,
            "measured_window_s": [opts.warmup, end_s],
            "send_errors": sorted({s.error for s in sent if s.error})[:5],
        },
    )


async def _drain(
    client: AsyncClient, expected: int, deadline: float, policy: str, progress: Progress, clock: Clock
) -> Sequence[InvocationOut]:
    listed: list[InvocationOut] = []
    while True:
        # A failed poll: the next one, or the last good listing at the deadline, counts.
        with contextlib.suppress(ClientError):
            listed = [inv async for inv in client.iter_invocations(function=FUNCTION, page_size=500)]
        ended = sum(1 for inv in listed if inv.state.terminal)
        progress.ended(policy, ended, expected)
        if ended >= expected or clock.monotonic() >= deadline:
            return listed
        await clock.sleep(min(DRAIN_POLL_S, max(0.1, deadline - clock.monotonic())))
