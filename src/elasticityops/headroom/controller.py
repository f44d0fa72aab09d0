"""The headroom controller: keeps warm GPU capacity per shape, sized by the planner's function.

Every sync (EOPS_HEADROOM_SYNC, and soon after an admission or an end) it:
1. finds the shapes of the registered functions (functions that ask the same share a pool),
2. observes each shape: the traffic the dispatcher reported (`seen`) and the capacity the
   backend shows (`WarmUnits.picture`), as the planner's model does,
3. sizes each with `size_headroom(observation, policy)`, clamps all to what the GPU budget
   leaves after the GPUs in use (`clamp_to_budget`: real work first), and
4. asks the backend to hold that many units, deleting the pools of shapes no function has.
Decisions are pure (sizing, clamp, traffic bookkeeping); the store and the backend are the
edges. After a restart the backend's own objects say what is held (`held`), so nothing is
doubled; the traffic windows fill again from the active invocations on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from elasticityops.background import Background, wait_set
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.catalog.gpus_in_use import gpus_in_use
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError
from elasticityops.domain.functions import FunctionSpec, GpuSpec
from elasticityops.domain.headroom.sizing import HeadroomPolicy, size_headroom
from elasticityops.domain.headroom.traffic import ClusterPicture, TrafficLog, TrafficWindows
from elasticityops.domain.headroom.warm_units import WarmShape, clamp_to_budget
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import FunctionStore, InvocationStore
from elasticityops.headroom.settings import HeadroomSettings

log = logging.getLogger(__name__)
MIN_GAP_S = 1.0


class WarmUnits(Protocol):
    """A backend's warm units (placeholder pods, buffer chunks, warm slots)."""

    mechanism: str

    def shape_of(self, spec: FunctionSpec) -> WarmShape:
        """The shape of the spec's work (raises EopsError for a spec the backend cannot run)."""
        ...

    async def held(self) -> dict[str, int]:
        """Units held now, by shape key, as the backend's own objects say (after a restart)."""
        ...

    async def hold(self, shape: WarmShape, units: int) -> None:
        """Make the shape's units `units` (0 keeps the pool's objects, holding nothing)."""
        ...

    async def release_others(self, keep: Collection[str]) -> None:
        """Remove the pools of every shape whose key is not in `keep`."""
        ...

    def picture(self, shape: WarmShape, units: int) -> ClusterPicture:
        """The shape's capacity now: free and provisioning nodes, units placed and waiting,
        idle nodes' time to scale-down, and the measured lead time."""
        ...


class HeadroomStore(FunctionStore, InvocationStore, Protocol):
    """What the controller reads: the functions and their specs, the active invocations."""


@dataclass(frozen=True)
class PoolStatus:
    shape: WarmShape
    wanted: int  # what the policy asked for
    held: int  # what the budget allowed and the backend was asked to hold
    busy: int
    waiting: int


class HeadroomController:
    def __init__(
        self,
        *,
        store: HeadroomStore,
        units: WarmUnits,
        settings: HeadroomSettings,
        budget: GpuBudget | None,
        clock: Clock,
        functions: FunctionCache | None = None,
        windows: TrafficWindows | None = None,
    ) -> None:
        self.store = store
        self.functions = functions or FunctionCache(store)
        self.units = units
        self.settings = settings
        self.policy: HeadroomPolicy = settings.policy()
        self.budget = budget
        self.clock = clock
        self.windows = windows or TrafficWindows()
        self._late_after = getattr(self.policy, "target_wait_s", settings.target_wait_s)
        self._logs: dict[WarmShape, TrafficLog] = {}
        self._specs: dict[tuple[str, int, str | None], WarmShape | None] = {}
        self._seen: list[Invocation] = []
        self._units: dict[WarmShape, int] = {}
        self._held_at_start: dict[str, int] = {}
        self.pools: dict[WarmShape, PoolStatus] = {}
        self._wake = asyncio.Event()
        self._loop_task = Background("headroom controller")
        self.syncs = 0
        self.last_error = ""

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Adopt what the backend holds and size once; a cluster that cannot be asked now only
        delays that (the loop tries again each sync; names are deterministic, so a later
        write finds what is there instead of doubling it)."""
        for inv in await self.store.active():
            self._seen.append(inv)
        try:
            self._held_at_start = await self.units.held()
            await self.sync()
        except EopsError as exc:
            self.last_error = exc.message
            log.warning("headroom: %s; trying again every %gs", exc.message, self.settings.sync_s)
        self._loop_task.start(self._loop)

    async def stop(self) -> None:
        """Stop sizing; the warm units stay as they are (the next start adopts them)."""
        await self._loop_task.stop()

    def seen(self, invocation: Invocation) -> None:
        """The dispatcher's report of an admission, a start or an end (cheap: folded at sync)."""
        self._seen.append(invocation)
        if invocation.state is not State.running:
            self._wake.set()  # an admission may use a warm unit up; an end frees budget

    # --- one sync -------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            await wait_set(self._wake, self.settings.sync_s)
            # Admissions and ends come many a second at load (a rehearsal of the normal load
            # woke it four times a second, each sync a list of placeholder pods): they bring a
            # sync forward, to at most one per MIN_GAP_S.
            await self.clock.sleep(min(MIN_GAP_S, self.settings.sync_s))
            self._wake.clear()
            try:
                await self.sync()
                self.last_error = ""
            except EopsError as exc:
                self.last_error = exc.message
                log.warning("headroom sync failed: %s", exc.message)
            except Exception as exc:  # the next sync tries again; the held units stay
                self.last_error = str(exc)
                log.exception("headroom sync failed")

    async def sync(self) -> None:
        now = self.clock.now()
        shapes = await self._function_shapes()
        await self._fold_seen(now)
        t = now.timestamp()
        tod = _seconds_of_day(now)
        wanted: dict[WarmShape, int] = {}
        for shape in shapes:
            traffic = self._log(shape, t)
            units = self._units.get(shape, self._held_at_start.get(shape.key, 0))
            observation = traffic.observe(t, tod, self.units.picture(shape, units))
            wanted[shape] = size_headroom(observation, self.policy)
        # What admission counts as in use, not this controller's traffic view of it.
        in_use = await gpus_in_use(self.store, self.functions)
        units_now = clamp_to_budget(wanted, self.budget, in_use)
        for shape, units in units_now.items():
            await self.units.hold(shape, units)
        await self.units.release_others({s.key for s in shapes})
        self._units = units_now
        self.pools = {
            s: PoolStatus(s, wanted[s], units_now[s], self._logs[s].busy, self._logs[s].waiting)
            for s in shapes
        }
        self.syncs += 1

    async def _function_shapes(self) -> set[WarmShape]:
        shapes: set[WarmShape] = set()
        for record in await self.store.list_functions():
            shape = self._shape_of(record.spec)
            if shape is not None:
                shapes.add(shape)
        return shapes

    def _shape_of(self, spec: FunctionSpec) -> WarmShape | None:
        try:
            return self.units.shape_of(spec)
        except EopsError:
            return None  # a spec the backend cannot run gets no warm capacity

    async def _fold_seen(self, now: datetime) -> None:
        seen, self._seen = self._seen, []
        t = now.timestamp()
        for inv in seen:
            # Counted under the type it runs on: a spilled one holds its second choice's GPU.
            key = (inv.function, inv.spec_version, inv.gpu_type)
            if key not in self._specs:
                spec = await self.functions.version(inv.function, inv.spec_version)
                self._specs[key] = None if spec is None else self._shape_of(on_type(spec, inv.gpu_type))
            shape = self._specs[key]
            if shape is None:
                continue
            traffic = self._log(shape, t)
            line = inv.timeline
            accepted = line.accepted.timestamp()
            if inv.state.terminal:
                if line.started is not None:
                    traffic.started(inv.id, accepted, line.started.timestamp())
                ended = line.finished if line.started is not None else None
                traffic.ended(inv.id, ended.timestamp() if ended is not None else None)
            elif line.started is not None:
                traffic.started(inv.id, accepted, line.started.timestamp())
            elif inv.state is State.pending:
                traffic.admitted(inv.id, accepted)
            elif inv.state is State.queued:
                traffic.requeued(inv.id)

    def _log(self, shape: WarmShape, t: float) -> TrafficLog:
        if shape not in self._logs:
            self._logs[shape] = TrafficLog(self.windows, self._late_after, started_at=t)
        return self._logs[shape]


def on_type(spec: FunctionSpec, gpu_type: str | None) -> FunctionSpec:
    """`spec` as it runs on `gpu_type` (one of its gpu.types; None: its first)."""
    if gpu_type is None or gpu_type == spec.gpu.type:
        return spec
    gpu = GpuSpec.model_validate({"type": gpu_type, "count": spec.gpu.count})
    return spec.model_copy(update={"gpu": gpu})


def _seconds_of_day(now: datetime) -> float:
    """Seconds since midnight in the gateway's local time zone (scheduled policies)."""
    local = now.astimezone()
    return local.hour * 3600.0 + local.minute * 60.0 + local.second + local.microsecond / 1e6


def status_rows(pools: Mapping[WarmShape, PoolStatus]) -> list[dict[str, object]]:
    """The pools as plain rows (GET /v1/headroom, metrics)."""
    return [
        {
            "shape": s.key,
            "gpu_type": s.gpu_type,
            "gpu_count": s.gpu_count,
            "describe": s.describe(),
            "wanted": p.wanted,
            "held": p.held,
            "busy": p.busy,
            "waiting": p.waiting,
        }
        for s, p in sorted(pools.items())
    ]
