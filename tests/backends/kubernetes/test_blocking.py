"""BlockingKubeApi, the one adapter for synchronous code, against a real HTTP server: calls from
many threads at once over one event loop, calls from inside another event loop, the domain's
errors, and closing."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import Conflict, NotFound, TemporaryError

from .scripted_server import Reply, ScriptedServer, scripted_in_thread

SETTINGS = KubernetesSettings(max_retries=1, retry_base_seconds=0.01, retry_cap_seconds=0.02)
NODES = "/api/v1/nodes"


def _client(server: ScriptedServer) -> BlockingKubeApi:
    return BlockingKubeApi(KubeApi.at(server.url, SETTINGS))


def test_calls_from_many_threads_at_once_share_one_client() -> None:
    routes = {rf"GET {NODES}/n\d+": [Reply(200, {"kind": "Node"})]}
    with scripted_in_thread([], routes) as srv, _client(srv) as api:
        with ThreadPoolExecutor(max_workers=16) as pool:
            got = list(pool.map(lambda i: api.get(f"{NODES}/n{i}"), range(64)))
        assert got == [{"kind": "Node"}] * 64
        assert api.api.requests == 64
    assert sorted(s.target for s in srv.seen) == sorted(f"{NODES}/n{i}" for i in range(64))


def test_errors_are_the_domains_and_calls_mirror_the_async_client() -> None:
    replies = [
        Reply(409, {"reason": "AlreadyExists", "message": "nodes n1 already exists"}),
        Reply(404, {"reason": "NotFound"}),
        Reply(404, {"reason": "NotFound", "message": "nodes n2 not found"}),
        Reply(200, {"items": [{"metadata": {"name": "a"}}], "metadata": {"resourceVersion": "7"}}),
        Reply(200, {"metadata": {"labels": {"x": "y"}}}),
        Reply(200),
        Reply(503, {"message": "etcd down"}),
        Reply(503, {"message": "etcd down"}),
    ]
    with scripted_in_thread(replies) as srv, _client(srv) as api:
        with pytest.raises(Conflict, match="already exists"):
            api.create(NODES, {"metadata": {"name": "n1"}})
        assert api.delete(f"{NODES}/n2") is False
        with pytest.raises(NotFound, match="n2 not found"):
            api.get(f"{NODES}/n2")
        items, rv = api.list(NODES, {"labelSelector": "a=b"}, page_size=10)
        assert ([i["metadata"]["name"] for i in items], rv) == (["a"], "7")
        patched = api.patch(f"{NODES}/a", {"metadata": {"labels": {"x": "y"}}})
        assert patched["metadata"]["labels"] == {"x": "y"}
        assert api.ok("/readyz") is True
        with pytest.raises(TemporaryError, match="etcd down"):
            api.get(f"{NODES}/a")  # one retry (max_retries=1), then the domain's error
    assert srv.seen[3].target == f"{NODES}?labelSelector=a%3Db&limit=10"
    assert srv.seen[4].headers["content-type"] == "application/merge-patch+json"


def test_a_call_from_inside_another_event_loop_does_not_deadlock() -> None:
    async def handler_of_some_async_test(api: BlockingKubeApi) -> object:
        return api.get("/version")  # blocking, on purpose: the client's loop is its own

    with scripted_in_thread([Reply(200, {"gitVersion": "v1"})]) as srv, _client(srv) as api:
        assert asyncio.run(handler_of_some_async_test(api)) == {"gitVersion": "v1"}


def test_close_stops_the_thread_twice_over_and_later_calls_are_refused() -> None:
    with scripted_in_thread([Reply(200, {})]) as srv:
        api = BlockingKubeApi(KubeApi.at(srv.url, SETTINGS), name="kube-api-to-close")
        assert api.get("/version") == {}
        [thread] = [t for t in threading.enumerate() if t.name == "kube-api-to-close"]
        api.close()
        api.close()
        assert not thread.is_alive()
        with pytest.raises(RuntimeError, match="closed"):
            api.get("/version")
