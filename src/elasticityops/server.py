"""Wiring: settings -> store -> backend -> dispatcher -> FastAPI app, and the files a gateway
keeps in its data dir (server secret, admin token)."""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI

from elasticityops.api.app import create_app
from elasticityops.api.auth import TokenChecker, hash_token, new_token
from elasticityops.api.metrics import Metrics
from elasticityops.api.runtime import Runtime
from elasticityops.backend_registry import build_backend
from elasticityops.dispatch.dispatcher import Dispatcher, DispatchSettings
from elasticityops.dispatch.functions import FunctionCache
from elasticityops.dispatch.hub import ChangeHub
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.functions import load_function_text
from elasticityops.domain.ports import Backend, FunctionRecord, Store
from elasticityops.domain.tokens import Scope
from elasticityops.settings import Settings
from elasticityops.store.sql import SqlStore

SECRET_FILE = "server-secret"
ADMIN_TOKEN_FILE = "admin-token"


def prepare_data_dir(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return data_dir


def _write_private(path: Path, data: bytes) -> None:
    """Create `path` readable by its owner only; fails if it exists (no silent overwrite)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def server_secret(data_dir: Path) -> bytes:
    """The key that per-invocation callback tokens are derived from; made on first start and
    kept, so jobs adopted after a restart keep valid tokens."""
    path = prepare_data_dir(data_dir) / SECRET_FILE
    if not path.exists():
        # Another process may make it first; then use theirs.
        with contextlib.suppress(FileExistsError):
            _write_private(path, secrets.token_bytes(32))
    return path.read_bytes()


async def open_store(settings: Settings) -> SqlStore:
    prepare_data_dir(settings.data_dir)
    return await SqlStore.open(
        settings.database_url,
        group_commit_max=settings.store.group_commit_max,
        read_threads=settings.store.read_threads,
    )


async def create_token(store: Store, name: str, clock: Clock, *, scope: Scope = Scope.admin) -> str:
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


async def deploy_files(store: SqlStore, files: list[Path], clock: Clock) -> list[FunctionRecord]:
    records = []
    for file in files:
        spec = load_function_text(file.read_text(), source=str(file))
        record, _ = await store.put_function(spec, clock.now())
        records.append(record)
    return records


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


def build_app(
    settings: Settings,
    clock: Clock | None = None,
    *,
    backend: Backend | None = None,
    store: Callable[[SqlStore], SqlStore] | None = None,
    freeze_heap: bool = True,
) -> FastAPI:
    """The gateway as an ASGI app; its lifespan opens the store and runs the dispatcher.
    `backend` replaces the one the settings name, and `store` wraps the opened store (tests
    drive the dispatcher's failure paths in process through these, without `freeze_heap`,
    which only pays in a gateway process of its own)."""
    the_clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = await open_store(settings)
        store_ = opened if store is None else store(opened)
        try:
            metrics = Metrics()
            store_.observe_transitions(metrics.on_transition)
            store_.observe_commits(metrics.on_commit)
            hub = ChangeHub()
            backend_ = backend or build_backend(settings, the_clock)
            secret = server_secret(settings.data_dir)
            functions = FunctionCache(store_)
            dispatcher = Dispatcher(
                store_, backend_, hub, the_clock, dispatch_settings(settings, secret), functions
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
                metrics=metrics,
            )
            app.state.runtime = runtime
            await dispatcher.start()
            if freeze_heap:
                _freeze_startup_heap()
            try:
                yield
            finally:
                await dispatcher.stop()
        finally:
            await store_.close()

    return create_app(settings, lifespan)
