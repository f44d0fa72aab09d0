"""Gateway replicas in this process: each `build_app` app served by uvicorn on its own free
127.0.0.1 port (so log follows stream, jobs reach their gateway's result callback and the CLI
runs against it as a subprocess), with its own data dir, all on one PostgreSQL database. A
replica made with `dispatch=False` serves the API only, as a follower does."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from backends.local.support import reaped_supervisors
from elasticityops.api.runtime import Runtime
from elasticityops.domain.invocations import Invocation
from elasticityops.server.app import build_app
from elasticityops.server.credentials import create_token
from elasticityops.settings import load_settings
from helpers.server import HOST, free_port

# Short bounds, so a test sees another replica's changes in well under a second.
FAST = {
    "EOPS_DISPATCH_TICK_SECONDS": "0.2",
    "EOPS_CHANGE_POLL_SECONDS": "0.2",
    "EOPS_FUNCTIONS_CHECK_SECONDS": "0.5",
    "EOPS_GPUS": "2",
}


@dataclass
class Replica:
    runtime: Runtime
    http: httpx.AsyncClient
    url: str
    token: str
    data_dir: Path

    async def deploy(self, body: bytes) -> None:
        name = json.loads(body)["name"]
        answer = await self.http.put(f"/v1/functions/{name}", content=body)
        assert answer.is_success, answer.text

    async def state_of(self, invocation_id: str) -> Invocation:
        inv = await self.runtime.store.get_invocation(invocation_id)
        assert inv is not None
        return inv

    async def until(
        self, invocation_id: str, check: Callable[[Invocation], bool], within_s: float = 30
    ) -> Invocation:
        """The invocation as this replica's store reads it, once `check` holds (polled: the
        change may be another replica's)."""
        async with asyncio.timeout(within_s):
            while True:
                inv = await self.state_of(invocation_id)
                if check(inv):
                    return inv
                await asyncio.sleep(0.1)

    def job_pid(self, invocation_id: str) -> int:
        """The pid of the job this replica's local backend started (its run dir's started.json)."""
        started = self.data_dir / "runs" / invocation_id / "started.json"
        pid = json.loads(started.read_text())["pid"]
        assert isinstance(pid, int)
        return pid


@asynccontextmanager
async def replica(data_dir: Path, database_url: str, *, dispatch: bool, **env: str) -> AsyncIterator[Replica]:
    port = free_port()
    settings = load_settings(
        env={
            "EOPS_DATA_DIR": str(data_dir),
            "EOPS_DATABASE_URL": database_url,
            "EOPS_HOST": HOST,
            "EOPS_PORT": str(port),
            **FAST,
            **env,
        }
    )
    app = build_app(settings, freeze_heap=False, dispatch=dispatch)
    server = uvicorn.Server(
        uvicorn.Config(app, host=HOST, port=port, lifespan="on", log_level="warning", access_log=False)
    )
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(60):
            while not server.started:
                if serving.done():
                    serving.result()  # raises what stopped it
                    raise RuntimeError("the replica's server ended before it started")
                await asyncio.sleep(0.02)
        runtime: Runtime = app.state.runtime
        token = await create_token(runtime.store, "test", runtime.clock)
        url = f"http://{HOST}:{port}"
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as http:
            yield Replica(runtime, http, url, token, data_dir)
    finally:
        server.should_exit = True
        await serving


@asynccontextmanager
async def leader_and_follower(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    """Replica a, which dispatches (what jobs its local backend leaves are stopped by pid at
    the end), and replica b, which serves the API only, on data dirs a and b of `tmp_path`."""
    with reaped_supervisors(tmp_path / "a" / "runs"):
        async with (
            replica(tmp_path / "a", database_url, dispatch=True) as a,
            replica(tmp_path / "b", database_url, dispatch=False) as b,
        ):
            yield a, b


def spec(name: str, code: str, **extra: object) -> bytes:
    """A function running `python -c CODE`, with the python running the tests."""
    return json.dumps({"name": name, "command": [sys.executable, "-c", code], **extra}).encode()


def writes_result(name: str, value: str) -> bytes:
    """A function whose job hands back `value` through its result file."""
    code = f"import json, os; open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps({value!r}))"
    return spec(name, code)


def prints_then_sleeps(name: str, seconds: float) -> bytes:
    code = f"import time; print('started', flush=True); time.sleep({seconds}); print('done', flush=True)"
    return spec(name, code)
