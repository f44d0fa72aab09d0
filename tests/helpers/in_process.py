"""The gateway in process: the app `build_app` makes, on a real SQLite store in a data dir of
the test's, with the backend the test gives, served over httpx's ASGI transport with an admin
token, the function `hello` deployed. What a real backend or store cannot be made to do on
demand (fail, hold a launch, lose the lease) is reached through it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from elasticityops.api.runtime import Runtime
from elasticityops.domain.ports import Backend
from elasticityops.ha.elector import LeaseStore
from elasticityops.server.app import build_app
from elasticityops.server.credentials import create_token
from elasticityops.settings import Settings, load_settings
from elasticityops.store.sql import SqlStore

HELLO = b'{"name": "hello", "command": ["python", "-c", "pass"]}'


def in_process_settings(data_dir: Path, **env: str) -> Settings:
    """The settings of `env` on a data dir of the test's, with a dispatch tick of 0.1 s."""
    return load_settings(env={"EOPS_DATA_DIR": str(data_dir), "EOPS_DISPATCH_TICK_SECONDS": "0.1", **env})


@asynccontextmanager
async def in_process_gateway(
    settings: Settings,
    backend: Backend,
    *,
    store: Callable[[SqlStore], SqlStore] | None = None,
    lease_store: LeaseStore | None = None,
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """The app's runtime and a client of it, for the length of its lifespan; `store` and
    `lease_store` as `build_app` takes them."""
    app = build_app(settings, backend=backend, store=store, lease_store=lease_store, freeze_heap=False)
    async with app.router.lifespan_context(app):
        runtime: Runtime = app.state.runtime
        token = await create_token(runtime.store, "test", runtime.clock)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Bearer {token}"},
        ) as client:
            deployed = await client.put("/v1/functions/hello", content=HELLO)
            assert deployed.status_code in (200, 201), deployed.text
            yield runtime, client


async def eventually(check: Callable[[], bool], within_s: float) -> None:
    """Poll what has no event to wait on from a test (log records, a fake backend's counters,
    the gateway's role)."""
    async with asyncio.timeout(within_s):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
