"""The one way synchronous code uses `KubeApi`: the dev cluster, tests and benches.

Each `BlockingKubeApi` runs its own event loop in a daemon thread and hands every call to it,
so one connection pool serves all calls (not a new loop, session and TLS handshake per call, as
`asyncio.run` per call would), calls may come from any thread at once (a bench's
and scale run call from thread pools), and code that already runs in an event loop of its own
(an async test) may call it too. The methods and errors are `KubeApi`'s, only blocking: the
domain error tree, never an aiohttp exception."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar, Unpack

from elasticityops.backends.kubernetes.api import KubeApi, Params, RequestOptions
from elasticityops.backends.kubernetes.objects import KubeObject

T = TypeVar("T")


class BlockingKubeApi:
    """`KubeApi`, blocking. Close it (or use it as a context manager) to stop its thread."""

    def __init__(self, api: KubeApi, name: str = "kube-api") -> None:
        self.api = api
        """The async client underneath; only usable from coroutines given to `run`."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run one coroutine of `self.api` on the client's loop and wait for its result."""
        if self._closed:
            work.close()
            raise RuntimeError("this BlockingKubeApi is closed")
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError("BlockingKubeApi called from its own event loop (it would wait forever)")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> KubeObject:
        return self.run(self.api.request(method, path, **options))

    def get(self, path: str, params: Params | None = None) -> KubeObject:
        return self.run(self.api.get(path, params))

    def create(self, path: str, body: KubeObject) -> KubeObject:
        return self.run(self.api.create(path, body))

    def patch(self, path: str, body: KubeObject) -> KubeObject:
        return self.run(self.api.patch(path, body))

    def delete(self, path: str, propagation: str = "Background") -> bool:
        return self.run(self.api.delete(path, propagation))

    def list(
        self, path: str, params: Params | None = None, page_size: int = 500
    ) -> tuple[list[KubeObject], str]:
        return self.run(self.api.list(path, params, page_size))

    def ok(self, path: str) -> bool:
        return self.run(self.api.ok(path))

    def close(self) -> None:
        """Close the connections, stop the loop and its thread; a second call does nothing."""
        if self._closed:
            return
        try:
            self.run(self.api.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> BlockingKubeApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
