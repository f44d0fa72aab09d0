"""Wiring: settings -> store -> backend -> dispatcher -> FastAPI app, with the leader election
that decides which replica runs the dispatcher and the headroom controller."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

from fastapi import FastAPI

from elasticityops.api.app import create_app
from elasticityops.api.auth import TokenChecker
from elasticityops.api.capacity_routes import read_capacity
from elasticityops.api.console.capacity import CapacityHistory
from elasticityops.api.console.feed import ConsoleFeed
from elasticityops.api.metrics import Metrics
from elasticityops.api.runtime import Runtime
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.changes.hub import ChangeHub
from elasticityops.changes.replicas import ChangePoller
from elasticityops.dispatch.dispatcher import Dispatcher
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.ports import Backend
from elasticityops.ha.elector import LeaderElector, LeaseStore
from elasticityops.ha.settings import default_identity
from elasticityops.ha.shared_clock import ClockSync, SharedClock
from elasticityops.headroom.controller import HeadroomController, HeadroomStore
from elasticityops.server.backends import build_backend, build_lease_store, build_warm_units
from elasticityops.server.credentials import server_secret
from elasticityops.server.startup import open_store
from elasticityops.settings import Settings
from elasticityops.store.sql import SqlStore
from elasticityops.webhooks.deliverer import WebhookDeliverer


def dispatch_settings(settings: Settings, secret: bytes) -> DispatchSettings:
    """The dispatcher's settings as read, with what the wiring knows: the secret and the URL."""
    return replace(settings.dispatch, server_secret=secret, callback_base_url=settings.callback_base_url)


def _freeze_startup_heap() -> None:
    """Move what start-up built (the app, the models, the imported modules) out of the
    collector's reach. Without it every full collection walks those few hundred thousand
    objects again: 50-70 ms with the event loop stopped, seen as the accept benchmark's p99
    (bench/gateway_accept.py)."""
    gc.collect()
    gc.freeze()


async def start_headroom(
    settings: Settings,
    store: HeadroomStore,
    backend: Backend,
    clock: Clock,
    dispatcher: Dispatcher,
    functions: FunctionCache,
) -> HeadroomController:
    """The headroom controller of --headroom, started, with the dispatcher reporting to it."""
    controller = HeadroomController(
        store=store,
        units=build_warm_units(settings, backend, clock),
        settings=settings.headroom,
        budget=settings.dispatch.gpu_budget,
        clock=clock,
        functions=functions,
    )
    dispatcher.watch(controller.seen)
    await controller.start()
    return controller


@asynccontextmanager
async def _elected(
    settings: Settings,
    runtime: Runtime,
    dispatcher: Dispatcher,
    deliverer: WebhookDeliverer,
    clock: Clock,
    lease_store: LeaseStore | None,
) -> AsyncIterator[LeaderElector]:
    """A replica of --leader-elect: it starts as a follower (the API serves) and campaigns; while
    it leads, it runs the dispatcher (whose start adopts the work in flight: Job names derive from
    invocation ids, so nothing is launched twice) and the headroom controller. Losing the lease
    stops both at once, before the lease can expire for the others. On the way out it stops
    leading and releases the lease, so a follower takes over at its next look."""

    async def lead() -> None:
        await dispatcher.start()
        await deliverer.start()
        if settings.headroom.enabled:
            runtime.headroom = await start_headroom(
                settings, runtime.store, runtime.backend, clock, dispatcher, runtime.functions
            )

    async def follow() -> None:
        controller, runtime.headroom = runtime.headroom, None
        if controller is not None:
            dispatcher.unwatch(controller.seen)
            await controller.stop()
        await deliverer.stop()
        await dispatcher.stop()

    close: Callable[[], Awaitable[None]] = _nothing
    if lease_store is None:
        lease_store, close = build_lease_store(settings, clock)
    elector = LeaderElector(
        lease_store,
        settings.leader.identity or default_identity(),
        settings.leader,
        clock,
        on_started_leading=lead,
        on_stopped_leading=follow,
    )
    runtime.election = elector
    elector.start()
    try:
        yield elector
    finally:
        try:
            await elector.stop(release=True)
        finally:
            await close()


async def _nothing() -> None:
    return None


async def _clock_of(
    store: SqlStore, given: Clock, handed_in: bool, sync_s: float
) -> tuple[Clock, ClockSync | None]:
    """The clock milestones are stamped on. Replicas stamp them on one clock, the database
    server's (ha/shared_clock.py); a clock handed in (tests, virtual time) is taken as it is,
    and a SQLite file has one gateway."""
    if handed_in or store.dialect == "sqlite":
        return given, None
    shared = SharedClock(given)
    sync = ClockSync(store, shared, sync_s)
    await sync.measure()
    sync.start()
    return shared, sync


@asynccontextmanager
async def _duties(
    settings: Settings,
    runtime: Runtime,
    dispatcher: Dispatcher,
    deliverer: WebhookDeliverer,
    lease_store: LeaseStore | None,
    *,
    dispatch: bool,
) -> AsyncIterator[None]:
    """The dispatcher, the webhook deliverer and the headroom controller, run while the app
    serves: by the elected leader with --leader-elect, else by this gateway (none with
    `dispatch=False`)."""
    if settings.leader.leader_elect:
        async with _elected(settings, runtime, dispatcher, deliverer, runtime.clock, lease_store):
            yield
        return
    if dispatch:
        await dispatcher.start()
        await deliverer.start()
        if settings.headroom.enabled:
            runtime.headroom = await start_headroom(
                settings, runtime.store, runtime.backend, runtime.clock, dispatcher, runtime.functions
            )
    try:
        yield
    finally:
        if runtime.headroom is not None:
            await runtime.headroom.stop()
        await deliverer.stop()
        await dispatcher.stop()


def begin_stop(app: FastAPI) -> None:
    """The gateway begins to stop: what requests hold open lets go at once (api/held_open.py)
    and the dispatcher launches nothing more. Nothing to do before the lifespan has started."""
    runtime: Runtime | None = getattr(app.state, "runtime", None)
    if runtime is not None:
        runtime.stopping.begin()


def build_app(
    settings: Settings,
    clock: Clock | None = None,
    *,
    backend: Backend | None = None,
    store: Callable[[SqlStore], SqlStore] | None = None,
    lease_store: LeaseStore | None = None,
    freeze_heap: bool = True,
    dispatch: bool = True,
) -> FastAPI:
    """The gateway as an ASGI app; its lifespan opens the store and runs the dispatcher.
    `backend` replaces the one the settings name, `store` wraps the opened store, and
    `lease_store` replaces the Lease on the cluster of --leader-elect (tests drive the
    dispatcher's failure paths and the roles in process through these, without `freeze_heap`,
    which only pays in a gateway process of its own). `dispatch=False`: a replica that only
    serves the API (the dispatcher and the headroom controller never start; another replica
    on the same database runs them)."""
    given_clock: Clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = await open_store(settings)
        store_ = opened if store is None else store(opened)
        sync: ClockSync | None = None
        try:
            the_clock, sync = await _clock_of(
                store_, given_clock, clock is not None, settings.replicas.clock_sync_s
            )
            metrics = Metrics()
            store_.observe_transitions(metrics.on_transition)
            store_.observe_commits(metrics.on_commit)
            hub = ChangeHub()
            backend_ = backend or build_backend(settings, the_clock, store_)
            secret = await server_secret(store_, settings.data_dir, the_clock)
            functions = FunctionCache(store_, the_clock, settings.replicas.functions_check_s)
            dispatcher = Dispatcher(
                store_, backend_, hub, the_clock, dispatch_settings(settings, secret), functions
            )
            deliverer = WebhookDeliverer(store_, the_clock, settings.webhooks, metrics.on_webhook_outcome)
            store_.observe_transitions(lambda _previous, _after: deliverer.wake())
            # A SQLite file has one gateway (lock_gateway): no other replica changes it.
            others_write = store_.dialect != "sqlite"
            feed = ConsoleFeed(
                store_,
                hub,
                the_clock,
                settings.feed,
                others_write=others_write,
                poll_s=settings.replicas.change_poll_s,
            )
            runtime = Runtime(
                settings=settings,
                store=store_,
                hub=hub,
                backend=backend_,
                dispatcher=dispatcher,
                clock=the_clock,
                server_secret=secret,
                tokens=TokenChecker(store_, the_clock),
                functions=functions,
                feed=feed,
                history=CapacityHistory(settings.history),
                metrics=metrics,
            )
            app.state.runtime = runtime
            runtime.stopping.on_begin(dispatcher.stop_launching)
            poller = ChangePoller(store_, hub, the_clock, settings.replicas.change_poll_s)
            if others_write:
                poller.start()
            feed.start()
            runtime.history.start(lambda: read_capacity(runtime), the_clock)
            try:
                async with _duties(settings, runtime, dispatcher, deliverer, lease_store, dispatch=dispatch):
                    if freeze_heap:
                        _freeze_startup_heap()
                    yield
                    # Begun already under `eops serve` (server/serving.py); here for any other
                    # ASGI server, and the tests' in-process gateway.
                    runtime.stopping.begin()
            finally:
                await runtime.history.stop()
                await feed.stop()
                await poller.stop()
        finally:
            if sync is not None:
                await sync.stop()
            await store_.close()

    return create_app(settings, lifespan)
