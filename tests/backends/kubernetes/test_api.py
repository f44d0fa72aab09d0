"""The client seam against a real HTTP server: retries, Retry-After, error translation, watches,
the calls the doctor and the dev cluster use (patch, probes), kubeconfig and credentials.

Time is a ManualClock driven by `clock.run`: it jumps to the next deadline whenever the call
is blocked sleeping, so the tests assert how long the client chose to wait without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest
import yaml
from lightkube.core.exceptions import ConfigError

from elasticityops.backends.kubernetes.api import KubeApi, ResourceExpired, load_config
from elasticityops.backends.kubernetes.ratelimit import TokenBucket, backoff_delay
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.transport import Transport
from elasticityops.backends.kubernetes.watch import KindWatch
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import Conflict, NotFound, PermanentError, TemporaryError

from .scripted_server import Reply, ScriptedServer, scripted

pytestmark = pytest.mark.anyio

SETTINGS = KubernetesSettings(max_retries=3, retry_base_seconds=0.5, retry_cap_seconds=8.0)
JOBS = "/apis/batch/v1/namespaces/ns/jobs"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def _api(
    server: ScriptedServer, clock: ManualClock, settings: KubernetesSettings = SETTINGS
) -> KubeApi:
    return KubeApi.at(server.url, settings, clock)


async def test_429_waits_what_retry_after_says(clock: ManualClock) -> None:
    async with scripted(
        [Reply(429, {"message": "slow down"}, {"Retry-After": "7"}), Reply(201, {"ok": 1})]
    ) as srv:
        api = await _api(srv, clock)
        assert await clock.run(api.create(JOBS, {"kind": "Job"})) == {"ok": 1}
        await api.close()
    assert clock.monotonic() == 7.0
    assert [s.method for s in srv.seen] == ["POST", "POST"]
    assert (api.errors, api.retries) == ({"429": 1}, 1)
    assert srv.seen[1].body == b'{"kind":"Job"}'


async def test_5xx_and_dropped_connections_are_retried(clock: ManualClock) -> None:
    async with scripted([Reply(503), Reply(drop=True), Reply(500), Reply(200, {"ok": 2})]) as srv:
        api = await _api(srv, clock)
        assert await clock.run(api.get(f"{JOBS}/a")) == {"ok": 2}
        # aiohttp itself resends an idempotent request once when the kept-alive connection it
        # reused turns out closed, so the drop may cost no retry of ours.
        assert api.retries in (2, 3)
        await api.close()
    assert len(srv.seen) == 4
    assert 0 < clock.monotonic() <= 0.5 + 1.0 + 2.0


async def test_gives_up_after_max_retries_with_a_temporary_error(clock: ManualClock) -> None:
    async with scripted([Reply(503, {"message": "etcd down"})] * 4) as srv:
        api = await _api(srv, clock)
        with pytest.raises(TemporaryError, match="etcd down"):
            await clock.run(api.get(f"{JOBS}/a"))
        await api.close()
    assert len(srv.seen) == 4
    assert api.errors == {"503": 4}


@pytest.mark.parametrize(
    ("status", "error", "words"),
    [
        pytest.param(409, Conflict, "AlreadyExists", id="409-conflict"),
        pytest.param(404, NotFound, "not found", id="404-not-found"),
        pytest.param(403, PermanentError, "render deploy", id="403-names-rbac"),
        pytest.param(422, PermanentError, "Invalid", id="422-invalid"),
        pytest.param(410, ResourceExpired, "Expired", id="410-expired"),
    ],
)
async def test_errors_are_translated_once(
    clock: ManualClock, status: int, error: type[Exception], words: str
) -> None:
    body = {
        "kind": "Status",
        "reason": {409: "AlreadyExists", 404: "NotFound", 403: "Forbidden", 422: "Invalid", 410: "Expired"}[
            status
        ],
        "message": "jobs x not found",
    }
    async with scripted([Reply(status, body)]) as srv:
        api = await _api(srv, clock)
        with pytest.raises(error, match=words):
            await api.get(f"{JOBS}/x")
        await api.close()
    assert len(srv.seen) == 1  # never retried


async def test_delete_of_a_missing_object_is_false(clock: ManualClock) -> None:
    async with scripted([Reply(404, {"reason": "NotFound"}), Reply(200, {"kind": "Status"})]) as srv:
        api = await _api(srv, clock)
        assert await api.delete(f"{JOBS}/x") is False
        assert await api.delete(f"{JOBS}/y", "Foreground") is True
        await api.close()
    assert b'"propagationPolicy":"Foreground"' in srv.seen[1].body


async def test_list_follows_continue_tokens(clock: ManualClock) -> None:
    pages = [
        Reply(
            200,
            {"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t1", "resourceVersion": "5"}},
        ),
        Reply(200, {"items": [{"metadata": {"name": "b"}}], "metadata": {"resourceVersion": "9"}}),
    ]
    async with scripted(pages) as srv:
        api = await _api(srv, clock)
        items, rv = await api.list(JOBS, {"labelSelector": "a=b"}, page_size=1)
        await api.close()
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert rv == "9"
    assert "continue=t1" in srv.seen[1].target


async def test_patch_is_a_merge_patch(clock: ManualClock) -> None:
    async with scripted([Reply(200, {"metadata": {"name": "a", "labels": {"x": "y"}}})]) as srv:
        api = await _api(srv, clock)
        got = await api.patch(f"{JOBS}/a", {"metadata": {"labels": {"x": "y"}}})
        await api.close()
    assert got["metadata"]["labels"] == {"x": "y"}
    [seen] = srv.seen
    assert (seen.method, seen.target) == ("PATCH", f"{JOBS}/a")
    assert seen.headers["content-type"] == "application/merge-patch+json"
    assert seen.body == b'{"metadata":{"labels":{"x":"y"}}}'


async def test_replace_is_a_put_and_a_stale_resource_version_is_a_conflict(clock: ManualClock) -> None:
    lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
    stale = Reply(409, {"reason": "Conflict", "message": "the object has been modified"})
    async with scripted([Reply(200, {"kind": "Lease"}), stale]) as srv:
        api = await _api(srv, clock)
        assert await api.replace(lease, {"metadata": {"resourceVersion": "7"}}) == {"kind": "Lease"}
        with pytest.raises(Conflict, match="the object has been modified"):
            await api.replace(lease, {"metadata": {"resourceVersion": "7"}})
        await api.close()
    assert [(seen.method, seen.target) for seen in srv.seen] == [("PUT", lease), ("PUT", lease)]
    assert srv.seen[0].headers["content-type"] == "application/json"
    assert srv.seen[0].body == b'{"metadata":{"resourceVersion":"7"}}'


async def test_get_passes_params_and_create_sends_json(clock: ManualClock) -> None:
    async with scripted([Reply(200, {"kind": "Status"}), Reply(201, {"kind": "Job"})]) as srv:
        api = await _api(srv, clock)
        assert await api.get("/version", {"timeout": "5s"}) == {"kind": "Status"}
        assert await api.create(JOBS, {"kind": "Job"}) == {"kind": "Job"}
        await api.close()
    assert srv.seen[0].target == "/version?timeout=5s"
    assert srv.seen[0].body == b""
    assert "content-type" not in srv.seen[0].headers
    assert srv.seen[1].headers["content-type"] == "application/json"


async def test_ok_is_true_only_for_200_and_never_retries(clock: ManualClock) -> None:
    async with scripted([Reply(200), Reply(404, {"reason": "NotFound"}), Reply(503)]) as srv:
        api = await _api(srv, clock)
        assert await api.ok("/readyz") is True
        assert await api.ok("/api/v1/namespaces/x") is False
        assert await api.ok("/readyz") is False
        url = srv.url
        await api.close()
    assert len(srv.seen) == 3  # the 503 was not retried
    assert api.retries == 0
    # Nothing listens any more: a refused connection is False too, not an exception.
    gone = KubeApi.at(url, SETTINGS, clock)
    assert await gone.ok("/readyz") is False
    await gone.close()


class _BrokenCredentials(httpx2.Auth):
    """An exec plugin that fails the way lightkube reports it."""

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        raise ConfigError("Exec gke-gcloud-auth-plugin returned 1: not logged in")
        yield request  # pragma: no cover (a generator, as httpx2's flows are)


async def test_failing_credentials_are_a_permanent_error_and_nothing_is_sent(clock: ManualClock) -> None:
    async with scripted([Reply(200, {})]) as srv:
        api = KubeApi(Transport(srv.url, auth=_BrokenCredentials()), SETTINGS, clock)
        with pytest.raises(PermanentError, match="no credentials: ConfigError: Exec gke-gcloud-auth-plugin"):
            await api.get("/version")
        with pytest.raises(PermanentError, match="no credentials"):
            await anext(api.stream("/api/v1/namespaces/ns/pods/p/log", {}, follow=False))
        assert await api.ok("/readyz") is False
        await api.close()
    assert srv.seen == []


def _kubeconfig(path: Path, server: str, cluster: dict[str, str] | None = None) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
                "users": [{"name": "u", "user": {"token": "sesame"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "gpu"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


async def test_connect_loads_the_kubeconfig_and_sends_its_token(clock: ManualClock, tmp_path: Path) -> None:
    async with scripted([Reply(200, {"gitVersion": "v1.36.3"})]) as srv:
        settings = replace(SETTINGS, kubeconfig=str(_kubeconfig(tmp_path / "kubeconfig", srv.url)))
        config = load_config(settings)
        assert config.namespace == "gpu"
        api = KubeApi.from_config(config, settings, clock)
        assert (await api.get("/version"))["gitVersion"] == "v1.36.3"
        await api.close()
    assert srv.seen[0].headers["authorization"] == "Bearer sesame"


async def test_a_token_file_is_read_again_after_a_401(clock: ManualClock, tmp_path: Path) -> None:
    # A rotated token (the kubelet rewrites a pod's projected token; a tokenFile kubeconfig
    # user): the 401 sends the request again, once, with the file's new token.
    token = tmp_path / "token"
    token.write_text("one\n")
    async with scripted([Reply(200, {}), Reply(401, {}), Reply(200, {"gitVersion": "v1.36.3"})]) as srv:
        path = _kubeconfig(tmp_path / "kubeconfig", srv.url)
        config = yaml.safe_load(path.read_text())
        config["users"] = [{"name": "u", "user": {"tokenFile": str(token)}}]
        path.write_text(yaml.safe_dump(config))
        settings = replace(SETTINGS, kubeconfig=str(path))
        api = KubeApi.connect(settings, clock)
        await api.get("/version")
        token.write_text("two\n")
        assert (await api.get("/version"))["gitVersion"] == "v1.36.3"
        await api.close()
    assert [r.headers["authorization"] for r in srv.seen] == ["Bearer one", "Bearer one", "Bearer two"]


def _service_account_dir(path: Path) -> Path:
    path.mkdir()
    (path / "token").write_text("pod-token")
    (path / "namespace").write_text("gpu-jobs")
    (path / "ca.crt").write_text("not read until a connection is made")
    return path


def test_without_a_kubeconfig_the_pods_service_account_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounted = _service_account_dir(tmp_path / "serviceaccount")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "not-read"))
    config = load_config(replace(SETTINGS, kubeconfig=None, service_account_dir=str(mounted)))
    assert config.cluster.server == "https://10.0.0.1:443"
    assert config.cluster.certificate_auth == str(mounted / "ca.crt")
    assert config.user is not None
    assert config.user.token_file == str(mounted / "token")
    assert config.namespace == "gpu-jobs"
    # Mounted, but not in a pod: the error names what is missing and what to do instead.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(PermanentError, match=r"\$KUBERNETES_SERVICE_HOST is not set .* pass --kubeconfig"):
        load_config(replace(SETTINGS, kubeconfig=None, service_account_dir=str(mounted)))
    # Nothing mounted: $KUBECONFIG is read.
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:6443")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    config = load_config(replace(SETTINGS, kubeconfig=None, service_account_dir=str(tmp_path / "absent")))
    assert config.cluster.server == "https://127.0.0.1:6443"


def test_an_unusable_kubeconfig_is_a_permanent_error(tmp_path: Path) -> None:
    missing_ca = {"certificate-authority": str(tmp_path / "no-such-ca.crt")}
    settings = replace(
        SETTINGS, kubeconfig=str(_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1", missing_ca))
    )
    with pytest.raises(PermanentError, match="cannot use the Kubernetes configuration"):
        KubeApi.connect(settings)
    with pytest.raises(PermanentError, match="cannot load the Kubernetes configuration"):
        KubeApi.connect(replace(SETTINGS, kubeconfig=str(tmp_path / "absent")))


async def test_answers_are_asked_for_uncompressed_and_a_non_json_one_is_a_domain_error(
    clock: ManualClock,
) -> None:
    # kube-apiserver gzips answers over 128 KiB for a client that accepts gzip, and this client
    # reads bodies as sent: it must not accept gzip. A body that is not JSON anyway (a proxy's
    # page) is a PermanentError, not a decoder's exception.
    async with scripted([Reply(200, raw=b"\x1f\x8b\x08\x00 not json"), Reply(200, [1, 2])]) as srv:
        api = await _api(srv, clock)
        with pytest.raises(PermanentError, match="the answer is not JSON"):
            await api.get(JOBS)
        with pytest.raises(PermanentError, match="not a JSON object"):
            await api.get(JOBS)
        await api.close()
    assert [s.headers.get("accept-encoding") for s in srv.seen] == ["identity", "identity"]
    assert len(srv.seen) == 2  # neither was retried


def _obj(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


async def test_watch_yields_events_and_raises_expired_on_410(clock: ManualClock) -> None:
    lines: list[object] = [
        {"type": "ADDED", "object": _obj("a", "11")},
        {"type": "BOOKMARK", "object": _obj("", "12")},
        {
            "type": "ERROR",
            "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
        },
    ]
    seen: list[str] = []
    async with scripted([Reply(200, lines=lines)]) as srv:
        api = await _api(srv, clock)

        async def consume() -> None:
            async for kind, obj in api.watch(JOBS, {"resourceVersion": "10"}):
                seen.append(f"{kind} {obj['metadata']['resourceVersion']}")

        with pytest.raises(ResourceExpired):
            await consume()
        await api.close()
    assert seen == ["ADDED 11", "BOOKMARK 12"]
    assert api.errors == {"410": 1}
    assert "allowWatchBookmarks=true" in srv.seen[0].target
    assert "resourceVersion=10" in srv.seen[0].target


async def test_kind_watch_resumes_from_bookmarks_and_relists_on_410(clock: ManualClock) -> None:
    script = [
        Reply(200, {"items": [_obj("a", "3"), _obj("b", "4")], "metadata": {"resourceVersion": "10"}}),
        Reply(
            200,
            lines=[
                {"type": "MODIFIED", "object": _obj("a", "11")},
                {"type": "BOOKMARK", "object": _obj("", "15")},
            ],
        ),
        Reply(200, lines=[{"type": "ERROR", "object": {"code": 410, "message": "too old"}}]),
        # b vanished while the watch was expired: the relist must say so.
        Reply(200, {"items": [_obj("a", "20")], "metadata": {"resourceVersion": "21"}}),
    ]
    got: list[str] = []
    done = asyncio.Event()

    async def handler(kind: str, obj: dict[str, object]) -> None:
        meta = obj["metadata"]
        assert isinstance(meta, dict)
        got.append(f"{kind} {meta['name']}")
        if len(got) == 5:
            done.set()

    async with scripted(script) as srv:
        api = await _api(srv, clock)
        watch = KindWatch(api, JOBS, {"labelSelector": "x=y"}, handler, clock)
        task = asyncio.create_task(watch.run())
        await clock.run(asyncio.wait_for(done.wait(), 10))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await api.close()
    assert got == ["ADDED a", "ADDED b", "MODIFIED a", "MODIFIED a", "DELETED b"]
    watch_targets = [s.target for s in srv.seen if "watch=true" in s.target]
    assert "resourceVersion=10" in watch_targets[0]
    assert "resourceVersion=15" in watch_targets[1]
    assert watch.stats.relists == 2
    assert watch.stats.bookmarks == 1
    assert (watch.stats.resumes, watch.stats.expired) == (1, 1)


async def test_token_bucket_paces_a_burst(clock: ManualClock) -> None:
    bucket = TokenBucket(rate=10, burst=2, clock=clock)
    for _ in range(5):
        await clock.run(bucket.acquire())
    # 2 from the burst, 3 more at 10/s.
    assert clock.monotonic() == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("attempt", "retry_after", "low", "high"),
    [
        pytest.param(0, None, 0.25, 0.5, id="first"),
        pytest.param(3, None, 2.0, 4.0, id="doubles"),
        pytest.param(10, None, 4.0, 8.0, id="capped"),
        pytest.param(0, 3.0, 3.0, 3.0, id="retry-after-wins"),
        pytest.param(0, 60.0, 8.0, 8.0, id="retry-after-capped"),
    ],
)
def test_backoff_delay(attempt: int, retry_after: float | None, low: float, high: float) -> None:
    assert low <= backoff_delay(attempt, 0.5, 8.0, retry_after) <= high


def test_settings_are_checked() -> None:
    from elasticityops.domain.errors import InvalidInput
    from elasticityops.knobs import problems
    from elasticityops.settings import load_settings

    loaded = load_settings(
        {"EOPS_KUBE_NAMESPACE": "gpu", "EOPS_KUBE_QPS": "20", "EOPS_KUBE_CONCURRENCY": "8"}
    ).kubernetes
    assert (loaded.namespace, loaded.qps, loaded.concurrency) == ("gpu", 20.0, 8)
    found = problems(replace(SETTINGS, qps=0, gpu_driver_version="newest"))
    assert {p.field for p in found} == {"qps", "gpu_driver_version"}
    with pytest.raises(InvalidInput, match="EOPS_KUBE_QPS"):
        load_settings({"EOPS_KUBE_QPS": "fast"})
