"""The dispatcher: admits queued invocations to the backend and turns the backend's events into
state transitions.

Each cycle takes a snapshot (queued, active, functions, free GPUs), lets the pure `plan_cycle`
decide, then applies the plan once. Admission writes `queued -> pending` BEFORE calling
`backend.launch`: launch is idempotent, so if the gateway dies between the two, the restart finds
a pending invocation the backend has no trace of and launches it (exactly once). A running
invocation the backend has lost is failed as `lost`, never run a second time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from elasticityops.background import Background, cancelled_and_done
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.changes.hub import ChangeHub
from elasticityops.dispatch.cycle import CyclePlan, plan_cycle
from elasticityops.dispatch.event_lanes import EventLanes
from elasticityops.dispatch.lost_nodes import end_lost_node
from elasticityops.dispatch.preempting import Preempter
from elasticityops.dispatch.reconcile import callback_url, plan_cancel, plan_recovery
from elasticityops.dispatch.relaunch import Relauncher, can_relaunch
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, NotFound, TemporaryError
from elasticityops.domain.events import BackendEvent, Finished, finished_event
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.gpus_held import ActiveCounts, by_version
from elasticityops.domain.invocations import ACTIVE_STATES, FailureReason, Invocation, State, callback_token
from elasticityops.domain.ports import (
    Backend,
    CancelStore,
    Change,
    FunctionStore,
    InvocationStore,
    LaunchRequest,
    LedgerStore,
    TransitionStore,
)
from elasticityops.domain.spillover import next_type

log = logging.getLogger(__name__)

_BATCH_PAYLOAD_BYTES = 64 * 1024  # payloads read together per cycle; a pass holds at most 16 MiB


class DispatchStore(FunctionStore, InvocationStore, TransitionStore, CancelStore, LedgerStore, Protocol):
    """What the dispatcher reads and writes: the queue and the active invocations, their
    transitions, cancel requests, the node time events close, and specs (its FunctionCache)."""


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        backend: Backend,
        hub: ChangeHub,
        clock: Clock,
        settings: DispatchSettings,
        functions: FunctionCache | None = None,
    ) -> None:
        self.store = store
        self.backend = backend
        self.hub = hub
        self.clock = clock
        self.settings = settings
        self._kueue = settings.admission == "kueue"
        # The same cache the accept route reads (server/app.py hands both the one object).
        self.functions = functions or FunctionCache(store)
        self._loop_task = Background("dispatcher")
        self._stopping = False
        self._launching = True  # until the gateway begins to stop (stop_launching), for good
        self._admitting = asyncio.Semaphore(settings.launch_concurrency)
        self._events = EventLanes(self._record_with_retries, settings.event_concurrency)
        self._relauncher = Relauncher(store, backend, clock, self._launch_again)
        self._spill_loop_task = Background("spillover")
        self._spilling: dict[str, asyncio.Task[None]] = {}
        self.preempter = Preempter(store, backend, hub, clock, self.functions)
        self._watchers: list[Callable[[Invocation], None]] = []
        self._cancelling: dict[str, asyncio.Task[None]] = {}
        # From the start of adoption to stop: this dispatcher's backend owns the jobs (adoption
        # carries out cancel requests before the loop, while `running` is still False).
        self._started = False

    def watch(self, watcher: Callable[[Invocation], None]) -> None:
        """Call `watcher` with every invocation this dispatcher admits, and with each one a
        backend event changed (the headroom controller's view of the traffic). It must be
        cheap and must not raise: it runs on the admission and event paths."""
        self._watchers.append(watcher)

    def unwatch(self, watcher: Callable[[Invocation], None]) -> None:
        """Stop calling `watcher` (a headroom controller stopped when its leader steps down)."""
        with contextlib.suppress(ValueError):
            self._watchers.remove(watcher)

    def _tell(self, invocation: Invocation) -> None:
        for watcher in self._watchers:
            watcher(invocation)

    @property
    def running(self) -> bool:
        return self._loop_task.running

    async def start(self) -> None:
        """Watch the backend, adopt or repair what a previous gateway left active, then loop."""
        if self.running:
            return
        self._stopping = False
        await self.backend.start(self._on_event)
        self._started = True
        await self._recover()
        self._loop_task.start(self._loop)
        self._start_spillover()

    def stop_launching(self) -> None:
        """The gateway begins to stop: from now on admit, launch, preempt and spill nothing,
        for good (a start after this launches nothing either). A queued invocation stays queued
        for the next gateway; one admitted just now and not yet launched stays pending, and the
        next start's recovery launches it. Events are still recorded and cancels carried out
        until `stop`. (uvicorn waits for open connections before the lifespan's end calls
        `stop`: a job ending meanwhile must not start the next.)"""
        self._launching = False

    async def stop(self) -> None:
        """Stop admitting and watching. Running jobs keep running; the next start adopts them."""
        self._stopping = True
        self._started = False
        await self._stop_spillover()
        await self._loop_task.stop()
        for task in list(self._cancelling.values()):
            task.cancel()
        self._cancelling.clear()
        await self.backend.stop()
        await self._events.drain(self.settings.drain_seconds)

    async def cancel(self, invocation_id: str) -> Invocation:
        """Cancel: a queued invocation at once; a pending or running one by asking the backend to
        stop it, then recording `cancelled`. What to do is `plan_cancel`'s one decision, made
        again on the row as it is whenever the compare-and-set loses (a finish got there first:
        then it answers Conflict, never a 200 that says `succeeded`).

        On a replica whose dispatcher does not run, the backend's job is another replica's to
        stop: a queued invocation is still cancelled here (the compare-and-set races that
        replica's admission, and one of the two wins), a pending or running one gets a cancel
        request recorded, which the running dispatcher carries out (`_carry_out_requests`); the
        invocation with its request is returned, still active."""
        for _ in range(5):  # each round loses only to a real state change, so this ends quickly
            latest = await self.store.get_invocation(invocation_id)
            if latest is None:
                raise NotFound(
                    f"no invocation {invocation_id!r}; list them with GET /v1/invocations (eops ls)"
                )
            plan = plan_cancel(latest, self.clock.now())
            if plan.change is None:
                return latest  # cancelled already: cancelling again is a no-op
            if plan.stop_backend and not self._started:
                requested = await self.store.request_cancel(invocation_id, self.clock.now())
                if (
                    requested is not None
                    and requested.state in ACTIVE_STATES
                    and requested.cancel_requested is not None
                ):
                    self.hub.changed(invocation_id)
                    return requested
                continue  # it moved on (queued again, ended): decide again on the row as it is
            if plan.stop_backend:
                await self.backend.cancel(latest)
            changed = await self.store.apply(plan.change)
            if changed is not None:
                self.hub.changed(invocation_id)
                self._tell(changed)
                return changed
        changing = f"invocation {invocation_id!r} kept changing while being cancelled"
        raise TemporaryError(changing, retry_after=1.0)

    # --- the loop ---------------------------------------------------------------------------

    async def _carry_out_requests(self) -> None:
        """Cancel what other replicas were asked to (one indexed read a tick, empty nearly always),
        each through `cancel` in a task of its own so a slow backend does not hold the cycle
        up; a request for an invocation that ended meanwhile is dropped."""
        requests = await self.store.cancel_requests(self.settings.batch_size)
        ended = [inv.id for inv in requests if inv.state.terminal]
        if ended:
            await self.store.drop_cancel_requests(ended)
        for inv in requests:
            if inv.state.terminal or inv.id in self._cancelling:
                continue
            task = asyncio.create_task(self._carry_out(inv.id), name=f"cancel {inv.id}")
            self._cancelling[inv.id] = task
            task.add_done_callback(functools.partial(self._carried_out, inv.id))

    def _carried_out(self, invocation_id: str, _: asyncio.Task[None]) -> None:
        self._cancelling.pop(invocation_id, None)

    async def _carry_out(self, invocation_id: str) -> None:
        try:
            await self.cancel(invocation_id)
        except (Conflict, NotFound):
            # It ended otherwise before the cancel landed: nothing to cancel, the request goes.
            await self.store.drop_cancel_requests([invocation_id])
        except Exception:
            log.exception("carrying out the cancel request of %s failed", invocation_id)

    async def _loop(self) -> None:
        looked_at = self.clock.monotonic()  # adoption just looked
        while not self._stopping:
            try:
                # At most once a tick: the loop wakes for every accept (work_available), and a
                # read each time contended with accepting (bench/gateway_accept.py, paused).
                if self.clock.monotonic() - looked_at >= self.settings.tick_s:
                    looked_at = self.clock.monotonic()
                    await self._carry_out_requests()
                more = await self._cycle()
            except Exception:
                # The store or backend failed this time; the next cycle looks again.
                log.exception("dispatch cycle failed")
                more = False
            if not more:
                await self.hub.wait_for_work(self.settings.tick_s)

    async def _cycle(self) -> bool:
        """One admission pass. Returns True when another should follow at once."""
        if self.settings.paused or not self._launching:
            return False
        # Read together, with no await between: a stopped job's slot is released before its end
        # is reported (which ends its `freeing` entry), so these two never both miss its GPU.
        # The whole cycle, preemption included, decides over this one reading; a later one could
        # miss a GPU the earlier free count still held and stop a second victim for it.
        free = self.backend.free_gpus()
        freeing = self.preempter.freeing_by_type()
        active: ActiveCounts | None = None
        if free is not None and free <= 0:
            active = await self.store.active_counts_by_type()
            if not await self._may_preempt(by_version(active)):
                return False  # nothing can start (nor be preempted for); a finished job wakes us
        batch = self.settings.batch_size
        page = await self.store.queued(batch)
        if not page:
            return False
        if active is None:  # one read of the active counts a cycle
            active = await self.store.active_counts_by_type()
        queued = list(page)
        plan, versions = await self._plan(queued, active, free, freeing)
        more = len(page) >= batch  # there may be queued work past what was read
        # A page held back whole by a full GPU type (or a function at its max_concurrency) must
        # not hide the work of other types behind it: read the rest of the scan at once and plan
        # once more. Admission is greedy in admission order, so the first page's decisions stand
        # and only work behind it is added. (Planning each growing prefix page by page cost
        # 86 ms a cycle at 16 pages of a full type; one plan of the 4,096 rows, 10 ms.)
        if more and plan.look_further and self.settings.scan_pages > 1:
            rest_limit = batch * (self.settings.scan_pages - 1)
            rest = await self.store.queued(rest_limit, after=page[-1])
            if rest:
                queued += rest
                plan, versions = await self._plan(queued, active, free, freeing)
            more = len(rest) >= rest_limit
        # Concurrently, so the store's group-commit writer puts a whole pass of transitions in a
        # few transactions instead of one commit per invocation (a 1,000-request burst was
        # admitted at about the rate of sequential commits), and slow launches overlap.
        await asyncio.gather(*(self._apply(change) for change in plan.fail))
        # One read for the pass's small payloads instead of one per launch.
        payloads = await self.store.small_payloads([i.id for i in plan.admit], _BATCH_PAYLOAD_BYTES)
        await asyncio.gather(
            *(
                self._admit(inv, versions[(inv.function, inv.spec_version)], payloads.get(inv.id))
                for inv in plan.admit
            )
        )
        if self._launching and not self._kueue:
            # A victim's GPU would go to nothing once the stop has begun; with Kueue admission,
            # Kueue preempts (kueue_watching.py tells the gateway).
            await self.preempter.after_plan(plan, by_version(active), versions, freeing)
        return more and bool(plan.admit or plan.fail)

    async def _may_preempt(self, active: Mapping[tuple[str, int], int]) -> bool:
        """With no GPU free, whether a cycle could still do something: preempt."""
        return self.preempter.may_preempt(active, await self.functions.versions(list(active)))

    async def _plan(
        self, queued: list[Invocation], active: ActiveCounts, free: int | None, freeing: Mapping[str, int]
    ) -> tuple[CyclePlan, dict[tuple[str, int], FunctionSpec]]:
        """`plan_cycle` over `queued`, with the specs it needs (cached), and those specs;
        `freeing`: GPUs of stopped jobs still going away, held as in use."""
        functions = await self._functions({i.function for i in queued} | {name for name, _, _ in active})
        versions = await self.functions.versions(
            [(i.function, i.spec_version) for i in queued] + list(by_version(active))
        )
        plan = plan_cycle(
            queued=queued,
            active=active,
            functions=functions,
            versions=versions,
            free_gpus=free,
            total_gpus=self.backend.total_gpus(),
            gpu_budget=self.settings.gpu_budget,
            at=self.clock.now(),
            headroom=freeing,
        )
        if self._kueue:
            # Kueue owns quota and admission: each Job goes to its queue at once, up to the
            # safety cap on Jobs in flight.
            room = max(0, self.settings.kueue_max_jobs - sum(active.values()))
            plan = replace(plan, admit=plan.admit[:room])
        return plan, versions

    async def _admit(self, inv: Invocation, spec: FunctionSpec, payload: bytes | None) -> None:
        async with self._admitting:
            if not self._launching:
                return  # the stop began while this waited its turn: it stays queued
            admitted = Change(
                inv.id,
                State.pending,
                self.clock.now(),
                from_states=frozenset({State.queued}),
                gpu_type=inv.gpu_type,
            )
            pending = await self._apply(admitted)
            if pending is not None:  # None: cancelled meanwhile
                await self._launch(pending, spec, payload)

    async def _functions(self, names: set[str]) -> dict[str, FunctionSpec]:
        return {name: record.spec for name, record in (await self.functions.get_many(names)).items()}

    async def _launch(self, inv: Invocation, spec: FunctionSpec, payload: bytes | None = None) -> None:
        if not self._launching:
            return  # pending with no job: the next start's recovery launches it
        if payload is None:
            payload = await self.store.get_payload(inv.id)
        request = LaunchRequest(
            invocation=inv,
            spec=spec,
            payload=payload or b"",
            callback_url=callback_url(self.settings.callback_base_url, inv.id),
            callback_token=callback_token(self.settings.server_secret, inv.id),
        )
        try:
            await self.backend.launch(request)
        except Exception as exc:
            # A backend reports launch failures as events; one that raises instead (a bug, a
            # store read failing) takes the same route, so the end is recorded in one place.
            log.warning("launching %s failed: %s", inv.id, exc)
            failed = Finished.failed(self.clock.now(), FailureReason.launch_error, f"could not launch: {exc}")
            self._events.put(finished_event(inv.id, failed))

    async def _apply(self, change: Change) -> Invocation | None:
        changed = await self.store.apply(change)
        if changed is not None:
            self.hub.changed(change.id)
            self._tell(changed)
        return changed

    # --- restart ----------------------------------------------------------------------------

    async def _recover(self) -> None:
        active = await self.store.active()
        missing = await self.backend.adopt(active)
        # Those a previous gateway was preempting are finished as preemptions, never relaunched
        # under their old attempt nor failed as lost.
        await self.preempter.recover(active)
        plan = plan_recovery([i for i in active if i.preempting_by is None], missing, self.clock.now())
        for change in plan.lose:
            await self._apply(change)
        if plan.relaunch:
            functions = await self._functions({i.function for i in plan.relaunch})
            versions = await self.functions.versions((i.function, i.spec_version) for i in plan.relaunch)
            for inv in plan.relaunch:
                # The version it was accepted with; a deleted name's pending work fails.
                spec = versions.get((inv.function, inv.spec_version))
                if inv.function not in functions or spec is None:
                    deleted = inv.function not in functions
                    await self._apply(
                        Change(
                            inv.id,
                            State.failed,
                            self.clock.now(),
                            from_states=frozenset({State.pending}),
                            reason=FailureReason.function_deleted if deleted else FailureReason.launch_error,
                            message=f"function {inv.function!r} was deleted before this invocation ran"
                            if deleted
                            else f"version {inv.spec_version} of function {inv.function!r} is not kept; "
                            "invoke it again",
                        )
                    )
                else:
                    await self._launch(inv, spec)
        # Cancels asked of other replicas while no dispatcher ran.
        await self._carry_out_requests()
        if active:
            log.info(
                "restart: %d active invocations, %d adopted, %d relaunched, %d lost",
                len(active),
                len(active) - len(missing),
                len(plan.relaunch),
                len(plan.lose),
            )

    # --- backend events ---------------------------------------------------------------------

    async def _on_event(self, event: BackendEvent) -> None:
        """The backend's sink: hand the event to its invocation's lane and return."""
        self._events.put(event)

    async def _record_with_retries(self, event: BackendEvent) -> None:
        """Record one backend event. An event dropped here would leave the invocation active
        until the next restart re-reads the backend, so while the store is unavailable (a
        TemporaryError: PostgreSQL restarting, a lock held too long) the event waits in its
        lane, and those after it behind it, until the store is back, however long that is
        (a job of 0.2 s started and ended within a 4 s outage and stayed `pending` when this
        gave up after 2 s: tests/api/test_postgres_outage.py). Other failures (a bug, a row
        the store refuses) are retried `event_retries` times, then logged and dropped."""
        failures = 0
        outage = 0
        while True:
            try:
                await self._record(event)
                return
            except TemporaryError as exc:
                outage += 1
                if outage == 1 or outage % 20 == 0:
                    log.warning(
                        "event of %s waits for the store (%d tries): %s", event.invocation_id, outage, exc
                    )
                await self.clock.sleep(min(self.settings.event_wait_max_s, 0.2 * 2 ** min(outage, 5)))
            except Exception:
                failures += 1
                if failures >= self.settings.event_retries:
                    log.exception("could not record an event of %s: %s", event.invocation_id, event)
                    return
                await self.clock.sleep(0.2 * failures)

    async def _record(self, event: BackendEvent) -> None:
        """One store write per event: the store folds it into the row (`apply_event`); an end
        that says its node was lost is requeued or failed as its function's retries say."""
        lost = await end_lost_node(self.store, self.functions, event)
        if lost is not None:
            self.hub.changed(event.invocation_id)
            self._tell(lost)
            if event.charges:
                await self.store.charge(event.charges)  # node time it closed, kept regardless
        recorded = None if lost is not None else await self.store.record(event)
        if recorded is not None:
            self.hub.changed(event.invocation_id)
            self._tell(recorded[1])
            if event.note is not None:
                self._consider_spill(recorded[1])  # a stockout, say, moves it at once
        elif event.worker_runs:
            self.hub.changed(event.invocation_id)  # no row changed, but maybe its cost (run_again)
        self.preempter.on_event(event)
        if event.finished is not None:
            # The job is over (even if a cancel ended the invocation first): its GPU is free.
            self.hub.work_available()

    # --- spillover (domain.spillover decides, dispatch.relaunch moves) -----------------------

    def _start_spillover(self) -> None:
        if can_relaunch(self.backend):
            self._spill_loop_task.start(self._spill_loop)

    async def _stop_spillover(self) -> None:
        await self._spill_loop_task.stop()
        await cancelled_and_done(list(self._spilling.values()))
        self._spilling.clear()

    async def _spill_loop(self) -> None:
        """Look at every pending invocation now and then, for those that waited too long on
        their GPU type (notes are looked at as they come, in `_record`)."""
        period = min(30.0, max(1.0, self.settings.spill_after_seconds / 4))
        while True:
            await self.clock.sleep(period)
            try:
                # The grouped counts first: the rows are read only while some active work can
                # spill at all (most functions list one type).
                counts = await self.store.active_counts_by_type()
                versions = await self.functions.versions(by_version(counts))
                spilling = {key for key, spec in versions.items() if len(spec.gpu.types) > 1}
                if not spilling:
                    continue
                for inv in await self.store.active():
                    if (inv.function, inv.spec_version) in spilling:
                        self._consider_spill(inv)
            except Exception:
                log.exception("spillover pass failed")

    def _consider_spill(self, inv: Invocation) -> None:
        """Move a pending invocation to its next GPU type if `next_type` says so, in a task of
        its own (withdrawing a Job takes a while); one at a time per invocation."""
        if (
            not self._launching
            or inv.state is not State.pending
            or inv.timeline.capacity_ready is not None
            or inv.id in self._spilling
            or not can_relaunch(self.backend)
        ):
            return
        task = asyncio.create_task(self._spill(inv), name=f"spill {inv.id}")
        self._spilling[inv.id] = task
        task.add_done_callback(lambda _: self._spilling.pop(inv.id, None))

    async def _spill(self, inv: Invocation) -> None:
        try:
            spec = await self.functions.version(inv.function, inv.spec_version)
            if spec is None or len(spec.gpu.types) < 2:
                return
            current = inv.gpu_type or spec.gpu.type
            now = self.clock.now()
            spill = next_type(inv, current, spec.gpu.types, now, self.settings.spill_after_seconds)
            if spill is None:
                return
            moved = await self._relauncher.relaunch_on(replace(inv, gpu_type=current), spill.to, spill.reason)
            if moved is not None:
                self.hub.changed(inv.id)
        except Exception:
            log.exception("spilling %s over failed", inv.id)

    async def _launch_again(self, inv: Invocation) -> None:
        spec = await self.functions.version(inv.function, inv.spec_version)
        if spec is not None:
            await self._launch(inv, spec)
