"""The dispatcher's preemption step: after a cycle's plan, stop lower-priority preemptible work
for higher-priority work the GPU budget (or full slots) keeps waiting. `choose_victims`
decides; this applies it, in three durable steps per victim:

1. `store.mark_preempting` (compare-and-set on pending|running): the intent, with a note naming
   the invocation it makes way for. A victim that ended meanwhile is left as it ended.
2. `backend.preempt`: its job is deleted / its process killed; whatever that job still says is
   dropped (an older attempt, or an invocation being preempted: `events.apply_event`).
3. `end_of_preemption`: requeued as its next attempt while its function's `retries` last, else
   failed `preempted` (compare-and-set again).

A gateway that dies anywhere in between finds the intent on restart (`recover`): the job is
stopped again (idempotent) and step 3 is applied. It never counts as lost and is never
relaunched under the old attempt, and the next attempt gets a job of its own, so no Job is
made twice. The freed GPUs go to the waiting work on the next cycle, through admission, once
the backend reports them free."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.changes.hub import ChangeHub
from elasticityops.dispatch.cycle import CyclePlan
from elasticityops.domain.admission import AdmissionSnapshot
from elasticityops.domain.clock import Clock
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.gpus_held import UNKNOWN_GPU_TYPE
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import Backend, InvocationRecords
from elasticityops.domain.preemption import Candidate, choose_victims, end_of_preemption, preempting_note

log = logging.getLogger(__name__)

FREEING_EXPIRY_S = 60.0
"""How long a stopped job's GPUs count as on their way to being free while the backend has not
reported its end (seconds); past that the backend's own count of free GPUs is believed."""


class Preempter:
    def __init__(
        self,
        store: InvocationRecords,
        backend: Backend,
        hub: ChangeHub,
        clock: Clock,
        functions: FunctionCache,
    ) -> None:
        self.store = store
        self.backend = backend
        self.hub = hub
        self.clock = clock
        self.functions = functions
        # Stopped jobs whose end the backend has not reported yet, by (id, attempt): (GPUs, GPU
        # type, when to stop waiting for it). Admission counts them as held (`freeing_by_type`)
        # until the GPUs are really free; preemption counts them as free (no one else is
        # stopped for them).
        self._freeing: dict[tuple[str, int], tuple[int, str, float]] = {}
        self._unfinished: dict[str, Invocation] = {}  # marked, but the backend failed to stop them
        self.preempted = 0  # victims stopped (count), for tests and logs

    def may_preempt(
        self, active: Mapping[tuple[str, int], int], versions: Mapping[tuple[str, int], FunctionSpec]
    ) -> bool:
        """Whether any pending or running work is preemptible at all (the common case, none,
        costs no read of the active rows)."""
        return bool(self._unfinished) or any(
            (spec := versions.get(key)) is not None and spec.preemptible for key in active
        )

    async def after_plan(
        self,
        plan: CyclePlan,
        active: Mapping[tuple[str, int], int],
        versions: Mapping[tuple[str, int], FunctionSpec],
        freeing: Mapping[str, int],
    ) -> int:
        """Preempt for what `plan` left waiting; returns how many victims were stopped.
        `freeing`: what `freeing_by_type` said when the plan's free GPUs were read (the plan held
        it as in use); it is given back whole, as a victim stopped for the same work earlier."""
        await self._retry_unfinished()
        snapshot = plan.snapshot
        if snapshot is None or not self.may_preempt(active, versions):
            return 0
        lowest = max(
            (spec.priority.rank for key, spec in versions.items() if key in active and spec.preemptible),
            default=-1,
        )
        admitted = {inv.id for inv in plan.admit}
        if not any(item.id not in admitted and item.priority.rank < lowest for item in snapshot.queued):
            return 0  # nothing waits that outranks preemptible work
        running = [inv for inv in await self.store.active() if inv.preempting_by is None]
        more = await self.functions.versions({(i.function, i.spec_version) for i in running} - set(versions))
        specs = {**versions, **more}
        candidates = [c for inv in running if (c := _candidate(inv, specs)) is not None]
        snapshot = _counting_as_free(snapshot, freeing)
        decided = choose_victims(snapshot, [inv.id for inv in plan.admit], candidates)
        by_id = {inv.id: inv for inv in running}
        # Concurrently, as admissions are: a burst of high-priority work may stop many, and the
        # store's group commit puts their writes in a few transactions.
        victims = [(by_id[p.victim], p.by) for p in decided]
        done = await asyncio.gather(
            *(self._preempt(v, by, specs.get((v.function, v.spec_version))) for v, by in victims)
        )
        stopped = sum(done)
        if stopped:
            self.hub.work_available()
        return stopped

    async def recover(self, active: Sequence[Invocation]) -> None:
        """After a restart: finish the preemptions a previous gateway began (steps 2 and 3)."""
        for inv in active:
            if inv.preempting_by is not None:
                spec = await self.functions.version(inv.function, inv.spec_version)
                await self._finish(inv, spec)

    def freeing_by_type(self) -> dict[str, int]:
        """GPUs per type of stopped jobs still going away (a pod terminating, a process being
        killed): admission counts them against the budget like GPUs in use, so the work they
        were stopped for starts when they are really free, not while they still run."""
        now = self.clock.monotonic()
        held: dict[str, int] = {}
        for key, (gpus, gpu_type, until) in list(self._freeing.items()):
            if until <= now:
                del self._freeing[key]  # its end never came (a pod never made): believe it gone
                continue
            held[gpu_type] = held.get(gpu_type, 0) + gpus
        return held

    def on_event(self, event: BackendEvent) -> None:
        """A stopped job's end: its GPUs are really free now."""
        if event.finished is not None and event.attempt is not None:
            self._freeing.pop((event.invocation_id, event.attempt), None)

    async def _preempt(self, victim: Invocation, by: str, spec: FunctionSpec | None) -> bool:
        marked = await self.store.mark_preempting(
            victim.id, by, preempting_note(victim, by, self.clock.now())
        )
        if marked is None:
            return False  # ended (or being preempted) meanwhile: left alone
        self.hub.changed(victim.id)
        log.info("preempting %s (attempt %d) for %s", victim.id, victim.attempt, by)
        return await self._finish(marked, spec)

    async def _finish(self, marked: Invocation, spec: FunctionSpec | None) -> bool:
        key = (marked.id, marked.attempt)
        # Before the job is asked to stop, so that an end reported at once is not missed.
        # The type it runs on (a spilled one holds its second choice's GPUs).
        gpu_type = marked.gpu_type or (spec.gpu.type if spec is not None else UNKNOWN_GPU_TYPE)
        gpus = spec.gpu.count if spec is not None else 1
        self._freeing[key] = (gpus, gpu_type, self.clock.monotonic() + FREEING_EXPIRY_S)
        try:
            await self.backend.preempt(marked)
        except Exception as exc:
            # The intent is stored: the next cycle tries again (and a restart would). Until
            # then it is active, and its GPUs count as in use as any active one's do.
            log.warning("could not stop %s to preempt it: %s", marked.id, exc)
            self._freeing.pop(key, None)
            self._unfinished[marked.id] = marked
            return False
        self._unfinished.pop(marked.id, None)
        retries = spec.retries if spec is not None else 0
        changed = await self.store.apply(end_of_preemption(marked, retries, self.clock.now()))
        if changed is not None:
            self.hub.changed(marked.id)
            self.preempted += 1
        return changed is not None

    async def _retry_unfinished(self) -> None:
        for inv in list(self._unfinished.values()):
            spec = await self.functions.version(inv.function, inv.spec_version)
            await self._finish(inv, spec)


def _counting_as_free(snapshot: AdmissionSnapshot, freeing: Mapping[str, int]) -> AdmissionSnapshot:
    """`snapshot` with the GPUs of stopped jobs still going away given back: admission held
    them (and the backend may not count them free yet), but they are no reason to stop more."""
    if not freeing:
        return snapshot
    total = sum(freeing.values())
    return replace(
        snapshot,
        free_gpus=None if snapshot.free_gpus is None else snapshot.free_gpus + total,
        gpu_budget_left=None if snapshot.gpu_budget_left is None else snapshot.gpu_budget_left + total,
        type_room={kind: room + freeing.get(kind, 0) for kind, room in snapshot.type_room.items()},
    )


def _candidate(inv: Invocation, specs: Mapping[tuple[str, int], FunctionSpec]) -> Candidate | None:
    spec = specs.get((inv.function, inv.spec_version))
    if spec is None:
        return None  # a version not kept: what it holds is unknown, so it is never a victim
    tl = inv.timeline
    return Candidate(
        id=inv.id,
        function=inv.function,
        priority=inv.priority,
        preemptible=spec.preemptible,
        gpus=spec.gpu.count,
        gpu_type=inv.gpu_type or spec.gpu.type,
        since=tl.started or tl.dispatched or tl.accepted,
    )
