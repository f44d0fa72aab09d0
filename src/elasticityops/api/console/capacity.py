"""What the console's capacity page shows, gathered at the edge as plain data: GPUs in use per
type against the budget, the queue and its head, warm headroom held and used, and the cluster's
GPU nodes by state (Kubernetes backend); and the last hours of it, sampled in memory.

The history is a bounded ring of samples in this process, not rows in the store: it costs no
migration and no writes under load, and a replica that restarts starts its chart afresh (the
numbers of now are always the store's). Each replica samples; the leader's headroom figures are
the only ones a follower lacks."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from elasticityops.background import Background
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.catalog.gpus_in_use import gpus_in_use
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.clock import Clock
from elasticityops.domain.headroom.warm_units import WarmShape
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, State
from elasticityops.domain.ports import Backend, InvocationStore
from elasticityops.headroom.controller import HeadroomController, PoolStatus
from elasticityops.knobs import knob

log = logging.getLogger(__name__)


@runtime_checkable
class GpuNodeStates(Protocol):
    """What a backend that watches GPU nodes tells (backends/kubernetes/gpu_nodes.py)."""

    def by_state(self) -> dict[str, int]: ...


@dataclass(frozen=True)
class HistorySettings:
    sample_s: float = knob(
        30.0,
        env="EOPS_CONSOLE_SAMPLE_SECONDS",
        unit="seconds",
        gt=0,
        le=3600,
        help="How often the console's capacity chart takes a sample (in this process's memory).",
    )
    keep_s: float = knob(
        6 * 3600.0,
        env="EOPS_CONSOLE_HISTORY_SECONDS",
        unit="seconds",
        gt=0,
        le=7 * 86400,
        help="How far back the console's capacity chart goes; older samples are dropped.",
    )

    @property
    def samples(self) -> int:
        return max(1, int(self.keep_s / self.sample_s))


@dataclass(frozen=True)
class Capacity:
    at: datetime
    in_use: Mapping[str, int]  # GPUs held by pending and running invocations, per type
    budget: GpuBudget | None
    states: Mapping[State, int]  # invocations per state
    head: Invocation | None  # the queued invocation admission takes next
    headroom: Mapping[WarmShape, PoolStatus] | None  # the controller's pools; None: not run here
    nodes: Mapping[str, int] | None  # GPU nodes by state (all clusters); None: the backend has no nodes
    slots: tuple[int | None, int | None]  # (free, total) GPUs of a backend with a fixed number
    nodes_by_cluster: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """GPU nodes by state in each of MultiKueue's workers; empty with one cluster."""

    @property
    def queued(self) -> int:
        return self.states.get(State.queued, 0)

    @property
    def active(self) -> int:
        return sum(self.states.get(s, 0) for s in ACTIVE_STATES)

    def sample(self) -> Sample:
        pools = (self.headroom or {}).items()
        held = sum(p.held * s.gpu_count for s, p in pools)
        busy = sum(min(p.busy, p.held) * s.gpu_count for s, p in pools)
        nodes = None if self.nodes is None else sum(self.nodes.values())
        return Sample(
            at=self.at,
            in_use=sum(self.in_use.values()),
            queued=self.queued,
            nodes=nodes if nodes is not None else self.slots[1],
            headroom_held=held,
            headroom_busy=busy,
        )


@dataclass(frozen=True)
class Sample:
    at: datetime
    in_use: int  # GPUs in use
    queued: int  # invocations waiting in the queue
    nodes: int | None  # GPU nodes (Kubernetes) or GPU slots (local); None: not known
    headroom_held: int  # warm GPUs held
    headroom_busy: int  # of those, in use

    @property
    def demand(self) -> int:
        """GPUs wanted: those in use and one for each queued invocation (the queue is counted,
        not sized: a queued invocation's spec is read only when it is admitted)."""
        return self.in_use + self.queued


def gpu_node_states(backend: Backend) -> tuple[dict[str, int] | None, dict[str, dict[str, int]]]:
    """GPU nodes by state in the gateway's own cluster (None: the backend watches no nodes),
    and in each of MultiKueue's workers (empty with one cluster)."""
    view = getattr(backend, "gpu_nodes", None)
    own = view.by_state() if isinstance(view, GpuNodeStates) else None
    by_cluster = {
        name: worker.by_state()
        for name, worker in (getattr(backend, "worker_gpu_nodes", None) or {}).items()
        if isinstance(worker, GpuNodeStates)
    }
    return own, by_cluster


async def gather(
    store: InvocationStore,
    functions: FunctionCache,
    backend: Backend,
    budget: GpuBudget | None,
    headroom: HeadroomController | None,
    clock: Clock,
) -> Capacity:
    """Grouped counts only, and the queue's head: never the rows, however many there are."""
    in_use = await gpus_in_use(store, functions)
    states = await store.counts_by_state()
    head = await store.queued(1)
    nodes, by_cluster = gpu_node_states(backend)
    if nodes is not None and by_cluster:
        # The manager's own (none, as a rule) and every worker's: the GPU nodes the work has.
        nodes = {state: n + sum(c.get(state, 0) for c in by_cluster.values()) for state, n in nodes.items()}
    return Capacity(
        at=clock.now(),
        in_use=dict(in_use),
        budget=budget,
        states=dict(states),
        head=head[0] if head else None,
        headroom=None if headroom is None else dict(headroom.pools),
        nodes=nodes,
        slots=(backend.free_gpus(), backend.total_gpus()),
        nodes_by_cluster=by_cluster,
    )


class CapacityHistory:
    """The last `keep_s` of samples, one every `sample_s`, taken by a loop of its own."""

    def __init__(self, settings: HistorySettings) -> None:
        self.settings = settings
        self.samples: deque[Sample] = deque(maxlen=settings.samples)
        self._loop_task = Background("capacity history")

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    def start(self, take: CapacityReader, clock: Clock) -> None:
        self._loop_task.start(lambda: self._loop(take, clock))

    async def stop(self) -> None:
        await self._loop_task.stop()

    async def _loop(self, take: CapacityReader, clock: Clock) -> None:
        while True:
            try:
                self.add((await take()).sample())
            except Exception:
                log.exception("capacity sample failed")  # a gap in the chart, not a stop
            await clock.sleep(self.settings.sample_s)


class CapacityReader(Protocol):
    async def __call__(self) -> Capacity: ...
