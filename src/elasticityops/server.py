"""Wiring: settings -> store -> backend -> dispatcher -> FastAPI app, and the files a gateway
keeps in its data dir (server secret, admin token)."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import secrets
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from elasticityops.api.app import create_app
from elasticityops.api.auth import TokenChecker, hash_token, new_token
from elasticityops.api.capacity_routes import read_capacity
from elasticityops.api.metrics import Metrics
from elasticityops.api.runtime import Runtime
from elasticityops.backend_registry import build_backend, build_lease_store, build_warm_capacity
from elasticityops.dispatch.capacity import CapacityHistory
from elasticityops.dispatch.dispatcher import Dispatcher, DispatchSettings
from elasticityops.dispatch.feed import ConsoleFeed
from elasticityops.dispatch.functions import FunctionCache
from elasticityops.dispatch.hub import ChangeHub
from elasticityops.dispatch.replicas import ChangePoller
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.domain.functions import load_function_text
from elasticityops.domain.ports import Backend, FunctionRecord, Housekeeping, TokenStore
from elasticityops.domain.tokens import Scope
from elasticityops.elasticity.controller import HeadroomController, HeadroomStore
from elasticityops.ha.elector import LeaderElector, LeaseStore
from elasticityops.ha.settings import default_identity
from elasticityops.ha.shared_clock import ClockSync, SharedClock
from elasticityops.pricing.table import capacity_of_backend
from elasticityops.settings import Settings
from elasticityops.store.node_seconds import Pricing
from elasticityops.store.sql import SqlStore

SECRET_FILE = "server-secret"
ADMIN_TOKEN_FILE = "admin-token"


LOCK_FILE = "gateway.lock"
_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600


class AlreadyRunning(EopsError):
    """Another gateway holds the data dir's (or the SQLite database's) lock."""

    code = "already_running"


def prepare_data_dir(data_dir: Path) -> Path:
    """The data dir, made 0700 if it is not there (whatever the umask). One that cannot be made
    is an InvalidInput naming it, never an OSError."""
    if not data_dir.is_dir():
        try:
            data_dir.mkdir(parents=True, exist_ok=True, mode=_PRIVATE_DIR)
            data_dir.chmod(_PRIVATE_DIR)
        except OSError as exc:
            raise InvalidInput(
                [
                    FieldProblem(
                        "--data-dir / EOPS_DATA_DIR",
                        f"cannot create {data_dir} ({exc.strerror or exc})",
                        "choose a directory you can write",
                    )
                ]
            ) from None
    return data_dir


def data_dir_warning(data_dir: Path) -> str | None:
    """A warning when other users can read the data dir (it holds the database and tokens)."""
    try:
        mode = stat.S_IMODE(data_dir.stat().st_mode)
    except OSError:
        return None
    if mode & 0o077:
        return (
            f"warning: the data dir {data_dir} is readable by other users (mode {mode:04o}); "
            f"restrict it with `chmod 700 {data_dir}`"
        )
    return None


def sqlite_path(database_url: str) -> Path | None:
    """The file of a SQLite URL; None for another database or an in-memory one."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return None  # the store reports it when it opens
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).expanduser().resolve()


def private_database_file(database_url: str) -> None:
    """Create a SQLite database file 0600 before SQLite does (SQLite gives its WAL and shared
    memory files the database file's mode), and take group and world bits off one that exists
    with them, its WAL and shm files too."""
    path = sqlite_path(database_url)
    if path is None:
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE))
    except FileExistsError:
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(FileNotFoundError):
                if stat.S_IMODE(file.stat().st_mode) & 0o077:
                    file.chmod(_PRIVATE_FILE)
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--database-url / EOPS_DATABASE_URL",
                    f"cannot create {path} ({exc.strerror or exc})",
                    "choose a directory you can write",
                )
            ]
        ) from None


def _lock(path: Path, what: str) -> int:
    """An exclusive lock on `path` (made 0600), holding our PID, for as long as the returned
    descriptor stays open (the process's life: the kernel drops it when the process ends, however
    it ends)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, _PRIVATE_FILE)
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / --database-url",
                    f"cannot create {path} ({exc.strerror or exc})",
                    "choose a directory you can write",
                )
            ]
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", errors="replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another gateway (PID {holder}) is running on {what} (it holds {path}); stop it, "
            "or give this one another --data-dir / --database-url"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lock_gateway(settings: Settings) -> list[int]:
    """Lock the data dir and the SQLite database for this process, so that a second gateway
    on either refuses to start (two would each run their full share of GPU slots). PostgreSQL
    is shared by design (compare-and-set), so it is not locked. Keep the descriptors open."""
    data_dir = prepare_data_dir(settings.data_dir)
    fds = [_lock(data_dir / LOCK_FILE, f"the data dir {data_dir}")]
    database = sqlite_path(settings.database_url)
    try:
        if database is not None:
            fds.append(_lock(database.with_name(database.name + ".lock"), f"the database {database}"))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _write_private(path: Path, data: bytes) -> None:
    """Create `path` readable by its owner only; fails if it exists (no silent overwrite)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


CALLBACK_SECRET = "callback"


async def server_secret(store: Housekeeping, data_dir: Path, clock: Clock) -> bytes:
    """The key that per-invocation callback tokens are derived from: one for every replica on
    the database (each derives the tokens of jobs another launched), made by the first to start
    and kept, so jobs adopted after a restart keep valid tokens. A data dir with the
    `server-secret` file of a release that kept it there gives its value to a database that
    has none yet, so the jobs that release launched keep theirs; after that the database's wins
    (the file is left in place, never written, for a rollback to find)."""
    kept = _old_secret_file(prepare_data_dir(data_dir) / SECRET_FILE)
    return await store.gateway_secret(CALLBACK_SECRET, kept or secrets.token_bytes(32), clock.now())


def _old_secret_file(path: Path) -> bytes | None:
    try:
        value = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / EOPS_DATA_DIR",
                    f"cannot read {path} ({exc.strerror or exc})",
                    "make it readable by the gateway's user, or remove it if this database's "
                    "gateways never used it",
                )
            ]
        ) from None
    return value or None


async def open_store(settings: Settings, *, create: bool = True) -> SqlStore:
    """The store of these settings. `create=False`: a SQLite database that is not there is
    refused (a mistyped --data-dir must not quietly start an empty one)."""
    database = sqlite_path(settings.database_url)
    if not create and database is not None and not database.is_file():
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / --database-url",
                    f"there is no database at {database}",
                    "check the path (a gateway's data dir holds eops.db), or pass --create to make one",
                )
            ]
        )
    prepare_data_dir(settings.data_dir)
    private_database_file(settings.database_url)
    return await SqlStore.open(
        settings.database_url,
        group_commit_max=settings.store.group_commit_max,
        read_threads=settings.store.read_threads,
        pricing=Pricing(capacity=capacity_of_backend(settings.backend)),
    )


async def create_token(store: TokenStore, name: str, clock: Clock, *, scope: Scope = Scope.admin) -> str:
    token, _ = await new_token(store, name, clock, scope=scope)
    return token


async def admin_token(store: SqlStore, data_dir: Path, clock: Clock) -> tuple[str, bool]:
    """The admin token (scope admin, no expiry) kept (mode 0600) in the data dir for the
    operator; (token, created). The database holds only its hash; one revoked is made anew."""
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        token = path.read_text().strip()
        found = await store.check_api_token(hash_token(token))
        if found is not None and found.scope is Scope.admin and not found.expired(clock.now()):
            return token, False
        path.unlink()  # revoked, or left from another database (e.g. EOPS_DATABASE_URL changed)
    token = await create_token(store, "admin", clock)
    _write_private(path, token.encode())
    return token, True


async def deploy_files(
    store: SqlStore, files: list[Path], clock: Clock, resolve_from: Path | None = None
) -> list[FunctionRecord]:
    """Deploy each spec file. `resolve_from`: a relative command argument naming a file under
    that directory becomes its absolute path, so the checkout's examples (`python
    examples/hello.py`) run whatever directory the gateway was started in."""
    records = []
    for file in files:
        spec = load_function_text(file.read_text(), source=str(file))
        if resolve_from is not None:
            command = [_resolved(arg, resolve_from) for arg in spec.command]
            if command != list(spec.command):
                spec = spec.model_copy(update={"command": command})
        record, _ = await store.put_function(spec, clock.now())
        records.append(record)
    return records


def _resolved(arg: str, root: Path) -> str:
    if not arg or Path(arg).is_absolute() or arg.startswith("-"):
        return arg
    candidate = root / arg
    return str(candidate.resolve()) if candidate.is_file() else arg


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
        capacity=build_warm_capacity(settings, backend, clock),
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
        if settings.headroom.enabled:
            runtime.headroom = await start_headroom(
                settings, runtime.store, runtime.backend, clock, dispatcher, runtime.functions
            )

    async def follow() -> None:
        controller, runtime.headroom = runtime.headroom, None
        if controller is not None:
            dispatcher.unwatch(controller.seen)
            await controller.stop()
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
        the_clock: Clock = given_clock
        sync: ClockSync | None = None
        try:
            if clock is None and store_.dialect != "sqlite":
                # Replicas stamp milestones on one clock, the database server's
                # (ha/shared_clock.py); a clock handed in (tests, virtual time) is taken as it
                # is, and a SQLite file has one gateway.
                shared = SharedClock(given_clock)
                sync = ClockSync(store_, shared, settings.replicas.clock_sync_s)
                await sync.measure()
                sync.start()
                the_clock = shared
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
            poller = ChangePoller(store_, hub, the_clock, settings.replicas.change_poll_s)
            if others_write:
                poller.start()
            feed.start()
            runtime.history.start(lambda: read_capacity(runtime), the_clock)
            try:
                if settings.leader.leader_elect:
                    async with _elected(settings, runtime, dispatcher, the_clock, lease_store):
                        if freeze_heap:
                            _freeze_startup_heap()
                        yield
                    return
                if dispatch:
                    await dispatcher.start()
                    if settings.headroom.enabled:
                        runtime.headroom = await start_headroom(
                            settings, store_, backend_, the_clock, dispatcher, functions
                        )
                if freeze_heap:
                    _freeze_startup_heap()
                try:
                    yield
                finally:
                    if runtime.headroom is not None:
                        await runtime.headroom.stop()
                    await dispatcher.stop()
            finally:
                await runtime.history.stop()
                await feed.stop()
                await poller.stop()
        finally:
            if sync is not None:
                await sync.stop()
            await store_.close()

    return create_app(settings, lifespan)
