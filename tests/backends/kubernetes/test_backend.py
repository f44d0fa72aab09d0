"""The backend's operations against a real HTTP server standing in for the API server:
launch (409 means "already there"), launch failures as events, cancel, adopt, logs streaming.
The dev-cluster tests (test_cluster.py) run the same code against the real control plane."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import orjson
import pytest

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.backend import KubernetesBackend
from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import NotFound
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.invocations import FailureReason, State, callback_token
from elasticityops.domain.node_history import LastJob, NodeHistory, NodeHistoryWrite
from elasticityops.domain.node_seconds import Phase
from elasticityops.domain.ports import LaunchRequest
from elasticityops.pricing.table import Capacity

from .builders import INV, T0, condition, gpu_node, invocation, job, pod, scheduled, spec, ts
from .scripted_server import Reply, ScriptedServer, scripted

pytestmark = pytest.mark.anyio

NS = "/namespaces/elasticityops"
JOBS = f"/apis/batch/v1{NS}/jobs"
PODS = f"/api/v1{NS}/pods"
SECRETS = f"/api/v1{NS}/secrets"
EVENTS = f"/api/v1{NS}/events"
SELECTOR = "app.kubernetes.io/managed-by=elasticityops,elasticityops.dev/instance=default"
EMPTY = {"items": [], "metadata": {"resourceVersion": "1"}}


def _watching(**extra: list[Reply]) -> dict[str, list[Reply]]:
    """Routes of a quiet cluster (empty lists, watches that stay open), `extra` first."""
    routes: dict[str, list[Reply]] = dict(extra)
    for path in (JOBS, PODS, EVENTS):
        routes.setdefault(f"^GET {re.escape(path)}\\?.*watch=true", [Reply(hold=True)])
        routes.setdefault(f"^GET {re.escape(path)}\\?", [Reply(200, EMPTY)])
    return routes


def _backend(srv: ScriptedServer, clock: ManualClock, **settings: Any) -> KubernetesBackend:
    config = KubernetesSettings(max_retries=1, concurrency=4, **settings)
    api = KubeApi.at(srv.url, config, clock)
    return KubernetesBackend(config, clock, api)


def _request(payload: bytes = b'{"x": 1}') -> LaunchRequest:
    return LaunchRequest(
        invocation=invocation(),
        spec=spec(),
        payload=payload,
        callback_url=None,
        callback_token=callback_token(b"server secret", INV),
    )


def ended(event: BackendEvent) -> Finished:
    assert event.finished is not None, event
    return event.finished


class Sink:
    def __init__(self) -> None:
        self.events: list[BackendEvent] = []
        self.changed = asyncio.Event()

    async def __call__(self, event: BackendEvent) -> None:
        self.events.append(event)
        self.changed.set()

    async def wait_for(self, count: int) -> list[BackendEvent]:
        while len(self.events) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 10)
        return self.events


def _bodies(srv: ScriptedServer, prefix: str) -> list[dict[str, Any]]:
    return [orjson.loads(s.body) for s in srv.seen if f"{s.method} {s.target}".startswith(prefix)]


async def test_launch_creates_job_then_secret_owned_by_it() -> None:
    clock = ManualClock(T0)
    routes = {
        f"^POST {JOBS}": [Reply(201, {**job(), "metadata": {**job()["metadata"], "uid": "uid-1"}})],
        f"^POST {SECRETS}": [Reply(201, {})],
    }
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        await backend.launch(_request())
        await backend._launcher.drain()
        await backend.stop()
    [created_job] = _bodies(srv, f"POST {JOBS}")
    [secret] = _bodies(srv, f"POST {SECRETS}")
    assert created_job["metadata"]["name"] == f"eops-{INV}"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert base64.b64decode(secret["data"]["payload"]) == b'{"x": 1}'
    assert backend._launcher.created == 1


async def test_launch_after_a_crash_finds_its_job_and_makes_no_second() -> None:
    clock = ManualClock(T0)
    routes = {
        f"^POST {JOBS}": [Reply(409, {"reason": "AlreadyExists"})],
        f"^GET {JOBS}/eops-{INV}": [
            Reply(200, {**job(), "metadata": {**job()["metadata"], "uid": "uid-old"}})
        ],
        f"^POST {SECRETS}": [Reply(409, {"reason": "AlreadyExists"})],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        await backend.launch(_request())
        await backend._launcher.drain()
        await backend.stop()
    assert len(_bodies(srv, f"POST {JOBS}")) == 1
    assert len(_bodies(srv, f"POST {SECRETS}")) == 1
    assert _bodies(srv, f"POST {SECRETS}")[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-old"
    assert sink.events == []  # no failure


async def test_a_launch_the_server_throttles_past_the_clients_retries_is_tried_again_not_failed() -> None:
    clock = ManualClock(T0)
    throttled = Reply(429, {"reason": "TooManyRequests"}, {"Retry-After": "1"})
    made = Reply(201, {**job(), "metadata": {**job()["metadata"], "uid": "uid-1"}})
    # Two tries per create (max_retries=1): the first create and its retry throttled, the second
    # create's first try throttled too, then the Job is made.
    routes = {f"^POST {JOBS}": [throttled, throttled, throttled, made], f"^POST {SECRETS}": [Reply(201, {})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        await backend.launch(_request())

        # Until the launch counts the Job made, not until the server has the Secret's request:
        # the count comes once that request's answer is back, and stop() would cancel it.
        async def counted() -> None:
            while backend._launcher.created == 0:  # noqa: ASYNC110 - the backend has no event
                await asyncio.sleep(0.01)

        await clock.run(counted())
        await backend.stop()
    assert len(_bodies(srv, f"POST {JOBS}")) == 4
    assert len(_bodies(srv, f"POST {SECRETS}")) == 1
    assert backend._launcher.created == 1
    assert sink.events == []  # no launch_error
    assert backend.client_counters().errors == {"429": 3}


async def test_a_launch_throttled_past_the_provisioning_timeout_is_a_launch_error() -> None:
    clock = ManualClock(T0)
    routes = {f"^POST {JOBS}": [Reply(503, {"message": "etcd is away"})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock, provisioning_timeout_seconds=60.0)
        await backend.start(sink)
        await backend.launch(_request())
        [event] = await clock.run(sink.wait_for(1))
        await backend.stop()
    done = ended(event)
    assert (done.state, done.reason) == (State.failed, FailureReason.launch_error)
    assert "etcd is away" in done.message
    assert 60.0 <= clock.monotonic() < 60.0 + 30.0 + 10.0  # one more pause at most, past the timeout


async def test_a_refused_launch_comes_back_as_a_launch_error() -> None:
    clock = ManualClock(T0)
    routes = {f"^POST {JOBS}": [Reply(403, {"reason": "Forbidden", "message": "jobs.batch is forbidden"})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        await backend.launch(_request())
        [event] = await sink.wait_for(1)
        await backend.stop()
    done = ended(event)
    assert (done.state, done.reason) == (State.failed, FailureReason.launch_error)
    assert "forbidden" in done.message
    assert _bodies(srv, f"POST {SECRETS}") == []  # nothing more was made for it
    assert backend.free_gpus() is None  # the one GPU cap is the dispatcher's budget


async def test_a_payload_too_big_for_its_secret_fails_before_anything_is_created() -> None:
    clock = ManualClock(T0)
    sink = Sink()
    async with scripted([], _watching()) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        too_big = b"x" * (backend.max_payload_bytes() + 1)
        await backend.launch(_request(payload=too_big))
        [event] = await sink.wait_for(1)
        await backend.stop()
    done = ended(event)
    assert (done.state, done.reason) == (State.failed, FailureReason.launch_error)
    assert "do not fit a Kubernetes Secret" in done.message
    assert [s for s in srv.seen if s.method == "POST"] == []  # no Job, no Secret


async def test_cancel_deletes_the_job_in_the_background() -> None:
    clock = ManualClock(T0)
    routes = {f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})]}
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        await backend.cancel(invocation(state=State.running))
        await backend.stop()
    [options] = _bodies(srv, f"DELETE {JOBS}")
    assert options["propagationPolicy"] == "Background"


async def test_adopt_replays_what_happened_and_names_what_to_launch_again() -> None:
    clock = ManualClock(T0)
    finished = "inv-0000000000000000000000done"
    starting = "inv-000000000000000000000start"
    gone = "inv-0000000000000000000000gone"
    jobs = {"items": [job([condition("Complete")], inv=finished), job(inv=starting)], "metadata": {}}
    pods = {
        "items": [
            pod(
                inv=finished,
                node="n1",
                phase="Succeeded",
                state={
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "message": "42",
                        "startedAt": ts(1),
                        "finishedAt": ts(2),
                    }
                },
            ),
            pod(inv=starting, node="n2", state={"waiting": {"reason": "ContainerCreating"}}),
        ],
        "metadata": {},
    }
    routes = {
        f"^GET {re.escape(JOBS)}\\?labelSelector=[^&]*&limit": [Reply(200, jobs)],
        f"^GET {re.escape(PODS)}\\?labelSelector=[^&]*&limit": [Reply(200, pods)],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)  # the watches' first lists replay what happened meanwhile
        missing = await backend.adopt(
            [
                invocation(finished, state=State.running),
                invocation(starting),
                invocation(gone, state=State.running),
            ]
        )
        await backend.stop()
    # The starting one may lack its payload Secret (crash between the two creates): relaunch.
    assert sorted(missing) == sorted([starting, gone])
    done = [e for e in sink.events if e.invocation_id == finished and e.finished is not None]
    assert len(done) == 1
    assert ended(done[0]).result == b"42"
    # Pods and Jobs were listed once each, by the watches; adoption listed nothing again.
    lists = [s.target for s in srv.seen if s.method == "GET" and "watch=true" not in s.target]
    assert sum(t.startswith(JOBS) for t in lists) == 1
    assert sum(t.startswith(PODS) for t in lists) == 1


async def test_logs_stream_from_the_pod_log_api() -> None:
    clock = ManualClock(T0)
    the_pod = pod(node="n", phase="Running", state={"running": {"startedAt": ts(1)}})
    name = the_pod["metadata"]["name"]
    routes = {
        f"^GET {re.escape(PODS)}\\?labelSelector={re.escape(SELECTOR)},": [
            Reply(200, {"items": [the_pod], "metadata": {}})
        ],
        f"^GET {PODS}/{name}/log": [Reply(200, lines=["line one", "line two"])],
    }
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        chunks = [c async for c in backend.logs(invocation(), follow=True)]
        await backend.stop()
    assert b"".join(chunks) == b'"line one"\n"line two"\n'
    [log_request] = [s.target for s in srv.seen if "/log" in s.target]
    assert "container=job" in log_request
    assert "follow=true" in log_request


async def test_logs_of_an_invocation_without_a_pod_are_empty() -> None:
    clock = ManualClock(T0)
    async with scripted([], _watching()) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        chunks = [c async for c in backend.logs(invocation(), follow=False)]
        await backend.stop()
    assert chunks == []


def _attempt_pod(attempt: int, **fields: Any) -> dict[str, Any]:
    """The pod of one attempt's Job: named and labelled by its attempt, made as it started."""
    made = pod(node="n", phase="Succeeded", state={"terminated": {"exitCode": 0}}, **fields)
    made["metadata"]["name"] = f"{job_name(INV, attempt)}-x7k2p"
    made["metadata"]["labels"][ATTEMPT_LABEL] = str(attempt)
    made["metadata"]["creationTimestamp"] = ts(100 * attempt)
    return made


async def test_logs_of_an_earlier_attempt_come_from_that_attempts_pod() -> None:
    clock = ManualClock(T0)
    pods = [_attempt_pod(0), _attempt_pod(1)]
    routes = {
        f"^GET {re.escape(PODS)}\\?labelSelector={re.escape(SELECTOR)},": [Reply(200, {"items": pods})],
        f"^GET {PODS}/{pods[0]['metadata']['name']}/log": [Reply(200, lines=["first"])],
        f"^GET {PODS}/{pods[1]['metadata']['name']}/log": [Reply(200, lines=["second"])],
    }
    second_attempt = replace(invocation(state=State.succeeded), attempt=1)
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        earlier = [c async for c in backend.logs(second_attempt, follow=False, attempt=0)]
        current = [c async for c in backend.logs(second_attempt, follow=False)]
        await backend.stop()
    assert (b"".join(earlier), b"".join(current)) == (b'"first"\n', b'"second"\n')


@pytest.mark.parametrize(
    ("state", "attempt", "asked", "follow"),
    [
        pytest.param(State.running, 1, 0, True, id="an-earlier-attempt-is-never-followed"),
        pytest.param(State.succeeded, 0, None, False, id="the-ended-current-one-past-its-ttl"),
    ],
)
async def test_logs_of_an_attempt_whose_pod_is_gone_say_so(
    state: State, attempt: int, asked: int | None, follow: bool
) -> None:
    clock = ManualClock(T0)
    inv = invocation(state=state)
    inv = replace(inv, attempt=attempt, timeline=replace(inv.timeline, started=T0))
    async with scripted([], _watching()) as srv:
        backend = _backend(srv, clock, ttl_after_finished_seconds=600)
        await backend.start(Sink())
        with pytest.raises(NotFound, match=r"no pod any more.*600 s.*EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS"):
            _ = [c async for c in backend.logs(inv, follow=follow, attempt=asked)]
        await backend.stop()
    assert not [s for s in srv.seen if "/log" in s.target]


def _unwatched_routes(
    pods: list[list[dict[str, Any]]], jobs: list[list[dict[str, Any]]], **extra: list[Reply]
) -> dict[str, list[Reply]]:
    """What a backend that was never started reads for a follow: the invocation's pods and
    Jobs, list after list (the last repeats)."""
    by_inv = f"\\?labelSelector={re.escape(SELECTOR)},"
    return {
        **extra,
        f"^GET {re.escape(PODS)}{by_inv}": [Reply(200, {"items": p, "metadata": {}}) for p in pods],
        f"^GET {re.escape(JOBS)}{by_inv}": [Reply(200, {"items": j, "metadata": {}}) for j in jobs],
    }


async def test_a_follow_without_watches_waits_on_the_api_until_the_container_starts() -> None:
    """A replica whose dispatcher does not run: no watch feeds progress, so the pod's own state,
    read again each second, says when there is output to follow."""
    clock = ManualClock(T0)
    waiting = pod(node="n", phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    running = pod(node="n", phase="Running", state={"running": {"startedAt": ts(1)}})
    name = running["metadata"]["name"]
    routes = _unwatched_routes(
        [[], [waiting], [waiting], [running]],
        [[job()]],
        **{f"^GET {PODS}/{name}/log": [Reply(200, lines=["out"])]},
    )
    async with scripted([], routes) as srv:
        backend = _backend(srv, clock)  # never started
        chunks = await clock.run(_collect(backend.logs(invocation(), follow=True)))
    assert b"".join(chunks) == b'"out"\n'
    assert sum(f"{PODS}?" in s.target for s in srv.seen) == 4
    assert clock.monotonic() == 3.0, "a look a second, not one per watch-less wait of seconds"
    assert not any("watch=true" in s.target for s in srv.seen)


@pytest.mark.parametrize(
    "jobs",
    [
        pytest.param([], id="its-job-is-gone"),
        pytest.param([job([condition("Failed", "DeadlineExceeded")])], id="its-job-failed"),
        pytest.param([job([condition("Complete")])], id="its-job-completed"),
    ],
)
async def test_a_follow_without_watches_ends_empty_once_the_job_ended_without_a_container(
    jobs: list[dict[str, Any]],
) -> None:
    clock = ManualClock(T0)
    waiting = pod(node="n", phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    routes = _unwatched_routes([[waiting]], [[job()], [job()], jobs])
    async with scripted([], routes) as srv:
        backend = _backend(srv, clock)
        chunks = await clock.run(_collect(backend.logs(invocation(), follow=True)), limit_s=10)
    assert chunks == []
    assert sum(f"{JOBS}?" in s.target for s in srv.seen) == 3


async def _collect(chunks: AsyncIterator[bytes]) -> list[bytes]:
    return [c async for c in chunks]


async def test_a_pod_refused_for_good_fails_the_invocation_and_stops_its_job() -> None:
    clock = ManualClock(T0)
    refused = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"eops-{INV}.1", "resourceVersion": "9"},
        "involvedObject": {"kind": "Job", "name": f"eops-{INV}", "namespace": "elasticityops"},
        "reason": "FailedCreate",
        "message": 'Error creating: pods "p" is forbidden: no PriorityClass with name eops-high was found',
        "lastTimestamp": "2026-01-01T00:00:05Z",
    }
    routes = {
        # The Job is known from the first list; its Event arrives on the Events watch.
        f"^GET {re.escape(JOBS)}\\?labelSelector=[^&]*&limit": [
            Reply(200, {"items": [job()], "metadata": {"resourceVersion": "1"}})
        ],
        f"^GET {re.escape(EVENTS)}\\?.*watch=true": [
            Reply(lines=[{"type": "ADDED", "object": refused}]),
            Reply(hold=True),
        ],
        f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        [event] = await sink.wait_for(1)
        for _ in range(100):  # the Job's deletion is a background chore
            if _bodies(srv, f"DELETE {JOBS}"):
                break
            await asyncio.sleep(0.01)
        await backend.stop()
    assert (ended(event).state, ended(event).reason) == (State.failed, FailureReason.launch_error)
    assert "no PriorityClass" in ended(event).message
    assert _bodies(srv, f"DELETE {JOBS}")[0]["propagationPolicy"] == "Background"
    # Events of Jobs too: the selector leaves out only routine reasons, never a kind.
    watch_target = unquote(next(s.target for s in srv.seen if s.target.startswith(EVENTS)))
    assert "involvedObject" not in watch_target
    assert "reason!=Scheduled" in watch_target


async def test_virtual_time_holds_still_while_the_sweep_sleeps() -> None:
    """The no-capacity sweep sleeps on the clock and must not move virtual time by itself: the
    old ManualClock advanced on every sleep, so a week passed in half a second and a Job
    created at the clock's "now" failed as no_capacity within 50 ms."""
    clock = ManualClock(T0)
    routes = {f"^GET {re.escape(JOBS)}\\?(?!.*watch=true)": [Reply(200, {**EMPTY, "items": [job()]})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock, provisioning_timeout_seconds=60)
        await backend.start(sink)
        await asyncio.sleep(0.5)
        assert clock.now() == T0
        assert sink.events == []
        # Time moves when the test says so, and then the sweep does its work.
        clock.advance(59)
        await asyncio.sleep(0.05)
        assert sink.events == []
        clock.advance(5)
        [event] = await sink.wait_for(1)
        await backend.stop()
    assert ended(event).reason is FailureReason.no_capacity


def _labelled(obj: dict[str, Any], gpu_type: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "labels": {**meta["labels"], "elasticityops.dev/gpu-type": gpu_type}}}


def _spill_request(gpu_type: str) -> LaunchRequest:
    return LaunchRequest(
        invocation=replace(invocation(), gpu_type=gpu_type),
        spec=spec(gpu={"type": ["nvidia-tesla-t4", "nvidia-l4"]}),
        payload=b"{}",
        callback_url=None,
        callback_token=callback_token(b"server secret", INV),
    )


async def test_withdraw_waits_for_the_job_and_secret_to_go_then_the_relaunch_asks_for_the_new_type() -> None:
    clock = ManualClock(T0)
    created = {**job(), "metadata": {**job()["metadata"], "uid": "uid-1"}}
    routes = {
        f"^POST {JOBS}": [Reply(201, created)],
        f"^POST {SECRETS}": [Reply(201, {})],
        f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})],
        # Still there while its pod goes (foreground deletion), then gone.
        f"^GET {JOBS}/eops-{INV}": [Reply(200, created), Reply(404, {"reason": "NotFound"})],
        f"^DELETE {SECRETS}/eops-{INV}": [Reply(200, {"kind": "Status"}), Reply(404, {"reason": "NotFound"})],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        t4 = _spill_request("nvidia-tesla-t4")
        await backend.launch(t4)
        await backend._launcher.drain()
        assert await clock.run(backend.withdraw(t4.invocation)) is True
        # The old Job's and pod's deletion, seen late through the watches, tells nothing.
        await backend._watching.on_job("DELETED", _labelled(job(), "nvidia-tesla-t4"))
        await backend._watching.on_pod("DELETED", _labelled(pod(deleting=True), "nvidia-tesla-t4"))
        await backend.launch(_spill_request("nvidia-l4"))
        await backend._launcher.drain()
        # The new Job's own events are told as usual.
        await backend._watching.on_pod("MODIFIED", _labelled(pod(node="gke-l4-1"), "nvidia-l4"))
        await backend.stop()
    deletes = [(s.method, s.target) for s in srv.seen if s.method == "DELETE"]
    assert deletes == [
        ("DELETE", f"{JOBS}/eops-{INV}"),
        ("DELETE", f"{JOBS}/eops-{INV}"),
        ("DELETE", f"{SECRETS}/eops-{INV}"),
        ("DELETE", f"{SECRETS}/eops-{INV}"),
    ]
    assert _bodies(srv, f"DELETE {JOBS}")[0]["propagationPolicy"] == "Foreground"
    first, second = _bodies(srv, f"POST {JOBS}")
    selectors = [j["spec"]["template"]["spec"]["nodeSelector"] for j in (first, second)]
    assert selectors == [
        {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
        {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    ]
    assert first["metadata"]["name"] == second["metadata"]["name"], "one name: never two at once"
    assert [e.finished for e in sink.events] == [None], "no end reported for the withdrawn Job"
    assert sink.events[0].capacity_ready is not None


async def test_a_job_that_will_not_go_fails_the_invocation_instead_of_leaving_it_without_one() -> None:
    clock = ManualClock(T0)
    routes = {
        f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})],
        f"^GET {JOBS}/eops-{INV}": [Reply(200, job())],  # stuck, a finalizer say
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        withdrawn = await clock.run(backend.withdraw(replace(invocation(), gpu_type="nvidia-tesla-t4")))
        [event] = await sink.wait_for(1)
        await backend.stop()
    assert withdrawn is False
    assert (ended(event).state, ended(event).reason) == (State.failed, FailureReason.no_capacity)
    assert "did not go within 120 s" in ended(event).message


def _of_attempt(obj: dict[str, Any], attempt: int) -> dict[str, Any]:
    """`obj` (a builders job or pod) as one of that attempt: its name and label."""
    meta = obj["metadata"]
    name = meta["name"].replace(f"eops-{INV}", f"eops-{INV}-a{attempt}")
    labels = {**meta["labels"], "elasticityops.dev/attempt": str(attempt)}
    return {**obj, "metadata": {**meta, "name": name, "labels": labels}}


async def test_preempt_deletes_that_attempts_job_and_reports_nothing_of_it() -> None:
    clock = ManualClock(T0)
    routes = {f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        running = invocation(state=State.running)
        await backend._watching.on_pod(
            "ADDED", pod(node="n1", phase="Running", state={"running": {"startedAt": ts(1)}})
        )
        await backend.preempt(running)
        # The old Job and pod go: their end is no news (the dispatcher records the preemption).
        await backend._watching.on_job("MODIFIED", job([condition("Failed", "PodFailurePolicy")]))
        await backend._watching.on_pod("MODIFIED", pod(node="n1", phase="Failed", deleting=True))
        await backend._watching.on_job("DELETED", job(active=1))  # its pod is still going
        assert [e.parts for e in sink.events] == [("capacity_ready", "started")]
        # Its pod gone at last: the GPU is free, said as the old attempt's end.
        await backend._watching.on_pod("DELETED", pod(node="n1", phase="Failed", deleting=True))
        await backend.stop()
    [options] = _bodies(srv, f"DELETE {JOBS}/eops-{INV}")
    assert options["propagationPolicy"] == "Background"
    assert [(e.parts, e.attempt) for e in sink.events] == [
        (("capacity_ready", "started"), 0),
        (("finished",), 0),
    ]


async def test_a_later_attempt_gets_a_job_of_its_own_and_the_old_ones_news_is_dropped() -> None:
    clock = ManualClock(T0)
    new_job = _of_attempt(job(), 1)
    routes = {
        f"^POST {JOBS}": [Reply(201, {**new_job, "metadata": {**new_job["metadata"], "uid": "uid-2"}})],
        f"^POST {SECRETS}": [Reply(201, {})],
        f"^DELETE {JOBS}/eops-{INV}$": [Reply(200, {"kind": "Status"})],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        # Attempt 0 was preempted; it is requeued and launched again as attempt 1.
        await backend.preempt(invocation(state=State.running))
        second = replace(invocation(), attempt=1)
        await backend.launch(LaunchRequest(second, spec(), b"{}", None, callback_token(b"s", INV)))
        await backend._launcher.drain()
        # The old attempt's Job finishing and going says nothing about attempt 1 ...
        await backend._watching.on_job("MODIFIED", job([condition("Complete")]))
        await backend._watching.on_job("DELETED", job())
        # ... while attempt 1's pod starting is news, stamped with its attempt.
        await backend._watching.on_job("ADDED", new_job)
        started = _of_attempt(pod(node="n2", phase="Running", state={"running": {"startedAt": ts(3)}}), 1)
        await backend._watching.on_pod("ADDED", started)
        assert await backend.adopt([replace(invocation(state=State.running), attempt=1)]) == []
        await backend.stop()
    [created] = _bodies(srv, f"POST {JOBS}")
    assert created["metadata"]["name"] == f"eops-{INV}-a1"
    assert created["metadata"]["labels"]["elasticityops.dev/attempt"] == "1"
    [secret] = _bodies(srv, f"POST {SECRETS}")
    assert secret["metadata"]["name"] == f"eops-{INV}-a1"
    # The old attempt is heard of only as gone (its GPU free), under its own attempt.
    assert [(e.parts, e.attempt) for e in sink.events] == [
        (("finished",), 0),
        (("capacity_ready", "started"), 1),
    ]


async def test_adopt_relaunches_an_attempt_whose_own_job_was_never_made() -> None:
    clock = ManualClock(T0)
    jobs = {"items": [job()], "metadata": {}}  # only attempt 0's Job (preempted, still going)
    routes = {f"^GET {re.escape(JOBS)}\\?labelSelector=[^&]*&limit": [Reply(200, jobs)]}
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(Sink())
        missing = await backend.adopt([replace(invocation(), attempt=1)])
        await backend.stop()
    assert missing == [INV]


async def test_a_preempted_job_that_never_had_a_pod_frees_its_gpu_when_it_goes() -> None:
    clock = ManualClock(T0)
    routes = {f"^DELETE {JOBS}/eops-{INV}": [Reply(200, {"kind": "Status"})]}
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock)
        await backend.start(sink)
        await backend._watching.on_job("ADDED", job())
        await backend.preempt(invocation())
        await backend._watching.on_job("DELETED", job())
        await backend.stop()
    [gone] = sink.events
    assert (gone.parts, gone.attempt) == (("finished",), 0)


class NodeRecords:
    """The store's GPU node records, as the backend reads them at its start."""

    def __init__(self, *records: NodeHistory) -> None:
        self.records = list(records)
        self.reads = 0

    async def gpu_node_history(self, cluster: str = "") -> list[NodeHistory]:
        self.reads += 1
        return list(self.records)


async def test_a_restarted_backend_goes_on_from_the_node_records_it_reads_at_its_start() -> None:
    """The first list claims the record of a node still there (whose last job ended before the
    restart: charged when the node goes); a record no listed node claims is of a node that went
    while no gateway watched: charged up to the first list, and forgotten in the same event."""
    clock = ManualClock(T0 + timedelta(seconds=900))
    last = LastJob(INV, 1, "hello", "nvidia-tesla-t4", T0 + timedelta(seconds=300))
    records = NodeRecords(
        NodeHistory("kept", "nvidia-tesla-t4", Capacity.spot, T0, unused=False, last=last),
        NodeHistory("gone", "nvidia-tesla-t4", Capacity.on_demand, T0, unused=True),
    )
    kept_node = gpu_node("kept", T0, spot=True)
    listed = {"items": [kept_node], "metadata": {"resourceVersion": "1"}}
    routes = {
        "^GET /api/v1/nodes\\?.*watch=true": [Reply(hold=True)],
        "^GET /api/v1/nodes\\?": [Reply(200, listed)],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        config = KubernetesSettings(max_retries=1, concurrency=4)
        api = KubeApi.at(srv.url, config, clock)
        backend = KubernetesBackend(config, clock, api, watch_gpu_nodes=True, node_history=records)
        await backend.start(sink)
        [gone] = sink.events
        clock.advance(300)
        assert backend._nodes is not None
        await backend._nodes.on_node("DELETED", kept_node)
        await backend.stop()
    assert records.reads == 1
    assert gone.invocation_id == ""
    assert [(c.source, c.spans[0].phase, c.spans[0].seconds) for c in gone.charges] == [
        ("node/gone", Phase.warm_unused, 900)
    ]
    assert gone.node_history == (NodeHistoryWrite("gone", None),)
    kept = sink.events[1]
    assert [
        (c.source, c.attempt, c.spans[0].phase, c.spans[0].seconds, c.capacity) for c in kept.charges
    ] == [(INV, 1, Phase.idle_after, 900, Capacity.spot)]
    assert kept.node_history == (NodeHistoryWrite("kept", None),)


async def test_a_pod_placed_on_a_node_closes_its_idle_time_with_the_nodes_record_in_one_event() -> None:
    clock = ManualClock(T0 + timedelta(seconds=30))
    last = LastJob("inv-old", 0, "hello", "nvidia-tesla-t4", T0 - timedelta(seconds=500))
    before = NodeHistory("n1", "nvidia-tesla-t4", Capacity.spot, T0 - timedelta(seconds=1000), False, last)
    listed = {
        "items": [gpu_node("n1", T0 + timedelta(seconds=-1000), spot=True)],
        "metadata": {"resourceVersion": "1"},
    }
    routes = {
        "^GET /api/v1/nodes\\?.*watch=true": [Reply(hold=True)],
        "^GET /api/v1/nodes\\?": [Reply(200, listed)],
    }
    sink = Sink()
    async with scripted([], _watching(**routes)) as srv:
        config = KubernetesSettings(max_retries=1, concurrency=4)
        api = KubeApi.at(srv.url, config, clock)
        backend = KubernetesBackend(
            config, clock, api, watch_gpu_nodes=True, node_history=NodeRecords(before)
        )
        await backend.start(sink)
        assert sink.events == [], "the record is as the node is: nothing to write"
        await backend._watching.on_pod("ADDED", pod(node="n1", conditions=[scheduled(30)]))
        await backend.stop()
    closed, placed = sink.events
    assert (closed.invocation_id, placed.invocation_id) == ("", INV)
    assert [(c.source, c.spans[0].phase, c.spans[0].seconds, c.capacity) for c in closed.charges] == [
        ("inv-old", Phase.idle_after, 530, Capacity.spot)
    ]
    assert closed.node_history == (NodeHistoryWrite("n1", replace(before, last=None)),)
    assert placed.charges == ()
    assert (placed.node_capacity, placed.warm) == (Capacity.spot, True)


async def test_bare_pods_are_made_as_pods_and_only_ended_invocation_pods_are_reaped() -> None:
    """The `pod` workload: the launch creates a Pod (no Job) and a Secret owned by it; the pod
    watch's first list fills what is to be deleted after the TTL, with no placeholder (it has
    the gateway's labels but no invocation) and no running pod among it."""
    clock = ManualClock(T0.replace(minute=30))
    done = {"terminated": {"exitCode": 0, "startedAt": ts(60), "finishedAt": ts(90)}}
    ended = pod(node="gpu-1", phase="Succeeded", state=done, inv="inv-ended")
    running = pod(node="gpu-2", phase="Running", state={"running": {"startedAt": ts(60)}}, inv="inv-running")
    placeholder = pod(node="gpu-3", phase="Failed")
    del placeholder["metadata"]["labels"]["elasticityops.dev/invocation"]
    placeholder["metadata"]["name"] = "eops-warm-t4-abcde"
    for p in (ended, running):
        p["metadata"]["name"] = p["metadata"]["name"].rsplit("-", 1)[0]  # a bare pod: the Job's name
    listed = {"items": [ended, running, placeholder], "metadata": {"resourceVersion": "5"}}
    routes = {
        f"^GET {re.escape(PODS)}\\?(?!.*watch=true)": [Reply(200, listed)],
        f"^POST {PODS}": [Reply(201, {**pod(), "metadata": {**pod()["metadata"], "uid": "pod-uid"}})],
        f"^POST {SECRETS}": [Reply(201, {})],
        f"^DELETE {PODS}/": [Reply(200, {"kind": "Status"})],
    }
    async with scripted([], _watching(**routes)) as srv:
        backend = _backend(srv, clock, workload="pod", ttl_after_finished_seconds=60)
        await backend.start(Sink())
        await backend.launch(_request())
        await backend._launcher.drain()
        await backend._reaper.reap(clock.now().timestamp())
        await backend.stop()
    [made] = _bodies(srv, f"POST {PODS}")
    assert made["kind"] == "Pod"
    assert made["metadata"]["name"] == f"eops-{INV}"
    assert _bodies(srv, f"POST {JOBS}") == []
    [secret] = _bodies(srv, f"POST {SECRETS}")
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "pod-uid"
    deleted = [s.target.split("?")[0] for s in srv.seen if s.method == "DELETE"]
    assert deleted == [f"{PODS}/eops-inv-ended"]  # ended 28.5 minutes ago, past its 60 s
    assert not any(s.target.startswith(JOBS) and s.method == "GET" for s in srv.seen)  # no Job watch


async def test_a_multikueue_worker_that_cannot_be_reached_does_not_hold_up_the_start(tmp_path: Any) -> None:
    """--kube-workers: a worker cluster down (here a port nothing listens on) is watched when it
    is back; the gateway starts on the manager meanwhile (Watching.start lists only its own)."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = tmp_path / "worker-1.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: w\n"
        f"clusters: [{{name: w, cluster: {{server: 'https://127.0.0.1:{port}',\n"
        "  insecure-skip-tls-verify: true}}]\n"
        "users: [{name: w, user: {token: t}}]\n"
        "contexts: [{name: w, context: {cluster: w, user: w}}]\n"
    )
    clock = ManualClock(T0)
    async with scripted([], _watching()) as srv:
        backend = _backend(srv, clock, workers=f"worker-1={kubeconfig}")
        await asyncio.wait_for(backend.start(Sink()), 10)
        try:
            worker_paths = [w.path for w in backend._watching.watches[3:]]
            assert worker_paths == [PODS, EVENTS], "the worker's pods and events are watched"
            assert all(not w.synced for w in backend._watching.watches[3:]), "not listed yet"
            assert all(w.synced for w in backend._watching.watches[:3]), "the manager's listed"
        finally:
            await backend.stop()
