#!/usr/bin/env python3
"""A burst of invocations against the dev cluster with its GPU nodes already present: how fast
ElasticityOps turns them into Jobs, running pods and finished invocations, side by side with
the naive way and the API server's own ceiling, in the same run on the same cluster.

    .venv/bin/python bench/k8s_burst.py                        # quick: 200 nodes, 200 invocations
    .venv/bin/python bench/k8s_burst.py --nodes 1000 --invocations 1000 --markdown

First an unreported warm-up (--warmup invocations through the ceiling loop), then the phases
--rounds times in turn (every other round in reverse order), each in a fresh namespace
(deleted afterwards), timed by one watch on its Jobs and pods:
- ceiling: a tight concurrent loop (64 in flight, no client-side limit) creating the same Job +
  payload Secret pairs the gateway creates, straight at the API server;
- naive: the seed's way, one Job created synchronously per request with the official
  `kubernetes` client's defaults;
- eops: `eops serve --backend kubernetes` as a subprocess, fed by a concurrent HTTP load
  generator (h2load, nghttp2's C client, when installed; else aiohttp; 32 connections); its CPU
  seconds and peak RSS are read from /proc;
- ceiling-pods, eops-pods: the same with bare Pods in place of Jobs (the gateway's
  EOPS_KUBE_WORKLOAD=pod): no Job controller between the create and the pod, which is what
  sets the pace once the controller-manager is throttled (--controller-qps 20
  --controller-burst 30, upstream's stock client rate).
- eops-kueue: the same gateway with `--admission kueue` (issue 39): every Job goes to a LocalQueue
  of the real Kueue (`--kueue`, implied by this phase), whose ClusterQueue `eops render kueue`
  makes with a quota of --invocations T4s (so the quota holds nothing back: what is measured is
  what passing through Kueue costs), no admission check; Kueue's manager's CPU is in
  `phase_cpu_s`. Kueue runs with its default feature gates, so it writes each Workload's status
  by server-side apply;
- eops-kueue-merge: the same with Kueue's WorkloadRequestUseMergePatch gate on (alpha in v0.17),
  its writes merge patches instead: Kueue is restarted with the gate before this phase and
  without it before an eops-kueue one (`kueue_gates` in the phase's output).
For each: seconds from the first request to all Jobs (or bare pods) created, all pods created,
all pods started (Running or
done) and all pods succeeded; Jobs created per second. Pods run --run-seconds (kwok).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.kueue_workloads import KUEUE_API
from elasticityops.backends.kubernetes.manifests import build_job, build_payload_secret, build_workload
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.watch import KindWatch
from elasticityops.devcluster.build import ensure_built
from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import Conflict, NotFound
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.invocations import Invocation, State, Timeline, new_invocation_id
from elasticityops.ops.kueue import KueueInputs, kueue_manifests
from machine_info import cpu_model

REPO = Path(__file__).resolve().parents[1]
JSON = {"Content-Type": "application/json"}
UNLIMITED = KubernetesSettings(qps=1e6, burst=10**6, concurrency=64, max_retries=8)


@dataclass
class Phase:
    name: str
    n: int
    t0: float = 0.0
    created_at: list[float] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)
    t_jobs: float | None = None
    t_pods: float | None = None
    t_started: float | None = None
    t_succeeded: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cpu_at_start: dict[int, tuple[str, float]] = field(default_factory=dict)

    def start(self) -> None:
        """The first request is about to go out: stamp the clock and every process's CPU."""
        self.cpu_at_start = cpu_by_process()
        self.t0 = time.monotonic()

    def jobs_created(self) -> None:
        self.t_jobs = time.monotonic() - self.t0
        # CPU seconds each process spent from the first request to the last Job: where the
        # creation window's two cores went (the control plane, the gateway, the load generator).
        spent = cpu_spent(self.cpu_at_start, cpu_by_process())
        self.extra["window_cpu_s"] = {k: round(v, 2) for k, v in sorted(spent.items()) if v >= 0.05}

    def summary(self) -> dict[str, Any]:
        rate = self.n / self.t_jobs if self.t_jobs else None
        return {
            "phase": self.name,
            "invocations": self.n,
            "all_jobs_created_s": _r(self.t_jobs),
            "jobs_per_s": _r(rate),
            "all_pods_created_s": _r(self.t_pods),
            "all_pods_started_s": _r(self.t_started),
            "all_succeeded_s": _r(self.t_succeeded),
            **self.extra,
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (name, user + system CPU seconds so far); the bench itself is "bench", an
    `eops serve` "gateway", the kernel's own threads "kernel"."""
    me = os.getpid()
    seen: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline", "cpu_times"]):
        times = proc.info["cpu_times"]
        if times is None:
            continue
        cmdline = proc.info["cmdline"] or []
        if proc.info["pid"] == me:
            name = "bench"
        elif "serve" in cmdline and any("elasticityops" in part for part in cmdline):
            name = "gateway"
        elif proc.info["ppid"] == 2 or not cmdline:
            name = "kernel"  # kworkers (named after their current work item), ksoftirqd, jbd2
        else:
            name = proc.info["name"] or "?"
        seen[proc.info["pid"]] = (name, times.user + times.system)
    return seen


def cpu_spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by process name between two `cpu_by_process` snapshots (per pid, so a
    process started meanwhile counts from zero)."""
    totals: dict[str, float] = {}
    for pid, (name, cpu) in after.items():
        start = before.get(pid)
        totals[name] = totals.get(name, 0.0) + cpu - (start[1] if start else 0.0)
    return totals


class Observer:
    """One watch on Jobs and one on pods of a namespace; stamps when counts reach N."""

    def __init__(self, kubeconfig: str, namespace: str, phase: Phase) -> None:
        self.settings = KubernetesSettings(kubeconfig=kubeconfig, namespace=namespace, qps=1e6, burst=10**6)
        self.phase = phase
        self.ns = namespace

    async def on_job(self, kind: str, obj: dict[str, Any]) -> None:
        p = self.phase
        if kind != "DELETED":
            p.jobs.add(obj["metadata"]["name"])
            if p.t_jobs is None and len(p.jobs) >= p.n and p.t0:
                p.jobs_created()

    async def on_pod(self, kind: str, obj: dict[str, Any]) -> None:
        p = self.phase
        name = obj["metadata"]["name"]
        if p.name.endswith("-pods") and kind != "DELETED":
            # Bare pods (the `pod` workload): the pod is what is created, there is no Job.
            p.jobs.add(name)
            if p.t_jobs is None and len(p.jobs) >= p.n and p.t0:
                p.jobs_created()
        phase = (obj.get("status") or {}).get("phase")
        p.pods.add(name)
        if phase in ("Running", "Succeeded", "Failed"):
            p.started.add(name)
        if phase == "Succeeded":
            p.succeeded.add(name)
        now = time.monotonic() - p.t0
        if p.t_pods is None and len(p.pods) >= p.n and p.t0:
            p.t_pods = now  # with Jobs, the Job controller's pace (its client rate caps it)
        if p.t_started is None and len(p.started) >= p.n:
            p.t_started = now
        if p.t_succeeded is None and len(p.succeeded) >= p.n:
            p.t_succeeded = now

    async def run(self, done: asyncio.Event) -> None:
        api = KubeApi.connect(self.settings)
        clock = SystemClock()
        watches = [
            KindWatch(api, f"/apis/batch/v1/namespaces/{self.ns}/jobs", {}, self.on_job, clock),
            KindWatch(api, f"/api/v1/namespaces/{self.ns}/pods", {}, self.on_pod, clock),
        ]
        tasks = [asyncio.create_task(w.run()) for w in watches]
        try:
            await done.wait()
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await api.close()


def spec(run_seconds: float, burst: int = 1) -> FunctionSpec:
    # max_concurrency at least the burst: its default (500) would rightly hold the rest of a
    # larger burst in the queue until the first ones finish, which is not what is measured here.
    return FunctionSpec(
        name="burst",
        image="worker:1",
        command=["python", "w.py"],
        annotations={RUN_SECONDS_ANNOTATION: str(run_seconds)},
        timeout_seconds=3600,
        max_concurrency=max(500, burst),
    )


def invocation() -> Invocation:
    return Invocation(
        id=new_invocation_id(),
        function="burst",
        state=State.pending,
        priority=Priority.normal,
        timeline=Timeline(accepted=SystemClock().now()),
    )


async def wait_until(cond: Any, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def run_ceiling(
    cluster: DevCluster, phase: Phase, ns: str, args: argparse.Namespace, *, hold: bool = False
) -> None:
    """`hold`: Jobs created suspended and bare pods behind a scheduling gate, so the same creates
    reach the API server but no pod asks for a node (bench/peak_replicas.py measures the ceiling
    in a cluster with no node, before its burst)."""
    pods = phase.name.endswith("-pods")
    settings = KubernetesSettings(
        **{
            **UNLIMITED.__dict__,
            "namespace": ns,
            "kubeconfig": str(cluster.kubeconfig_path),
            "workload": "pod" if pods else "job",
        }
    )
    path = f"/api/v1/namespaces/{ns}/pods" if pods else f"/apis/batch/v1/namespaces/{ns}/jobs"
    api = KubeApi.connect(settings)
    s = spec(args.run_seconds)
    work = [invocation() for _ in range(phase.n)]
    queue: asyncio.Queue[Invocation] = asyncio.Queue()
    for inv in work:
        queue.put_nowait(inv)

    async def worker() -> None:
        while not queue.empty():
            inv = queue.get_nowait()
            manifest = build_workload(s, inv, settings)
            if hold and pods:
                manifest["spec"]["schedulingGates"] = [{"name": "eops.dev/bench-ceiling"}]
            elif hold:
                manifest["spec"]["suspend"] = True
            made = await api.create(path, manifest)
            await api.create(
                f"/api/v1/namespaces/{ns}/secrets",
                build_payload_secret(inv.id, b"{}", "t", made["metadata"]["uid"], settings),
            )

    phase.start()
    await asyncio.gather(*(worker() for _ in range(64)))
    phase.extra["loop_s"] = round(time.monotonic() - phase.t0, 2)
    await api.close()


def run_naive_sync(cluster: DevCluster, phase: Phase, ns: str, args: argparse.Namespace) -> None:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    batch = client.BatchV1Api(api_client)
    settings = KubernetesSettings(namespace=ns)
    s = spec(args.run_seconds)
    phase.start()
    for _ in range(phase.n):
        # One request, one synchronous create, as a handler of the seed did it.
        batch.create_namespaced_job(ns, build_job(s, invocation(), settings))
    phase.extra["loop_s"] = round(time.monotonic() - phase.t0, 2)


async def run_eops(cluster: DevCluster, phase: Phase, ns: str, args: argparse.Namespace, tmp: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}
    env.update({"PYTHONUNBUFFERED": "1", **{k: v for k, v in args.gateway_env}})
    if phase.name.endswith("-pods"):
        env["EOPS_KUBE_WORKLOAD"] = "pod"
    if phase.name in KUEUE_PHASES:
        env["EOPS_ADMISSION"] = "kueue"
    log = (tmp / "gateway.log").open("wb")
    profile = ["-m", "cProfile", "-o", args.profile_gateway] if args.profile_gateway else []
    proc = psutil.Popen(
        [
            sys.executable,
            *profile,
            "-m",
            "elasticityops.cli.main",
            "serve",
            "--backend",
            "kubernetes",
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "--namespace",
            ns,
            "--data-dir",
            str(tmp / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=log,
        env=env,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            await wait_until(lambda: gateway_ready(url) or proc.poll() is not None, 120, "gateway ready")
            if proc.poll() is not None:
                raise RuntimeError("the gateway exited")
        except (TimeoutError, RuntimeError):
            log.flush()
            print((tmp / "gateway.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        token = (tmp / "data" / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            base_url=url, headers=headers, timeout=60, limits=httpx.Limits(max_connections=32)
        ) as http:
            answer = await http.put(
                "/v1/functions/burst", json=spec(args.run_seconds, phase.n).model_dump(mode="json")
            )
            answer.raise_for_status()
            cpu0 = sum(proc.cpu_times()[:2])
            spy = None
            if args.spy_gateway:
                # Sampled stacks of every gateway thread over the burst window (py-spy, not a
                # dependency: pip install py-spy), folded for a flame graph.
                spy = await asyncio.create_subprocess_exec(
                    *(
                        shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "--pid",
                        str(proc.pid),
                        "--duration",
                        str(args.spy_seconds),
                    ),
                    *("--rate", "250", "--threads", "--format", "raw", "--output", args.spy_gateway),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                await asyncio.sleep(0.5)
            if args.load == "h2load":
                await _send_with_h2load(phase, url, token, args.connections, tmp)
            else:
                await _send_with_aiohttp(phase, url, headers, args.connections)
            await wait_until(lambda: phase.t_succeeded is not None, args.timeout, "eops: all succeeded")
            if spy is not None:
                await spy.wait()

            # Succeeded pods are visible before the gateway records them: wait for its view too.
            async def succeeded() -> list[dict[str, Any]]:
                items: list[dict[str, Any]] = []
                cursor = None
                while True:
                    params: dict[str, Any] = {"state": "succeeded", "limit": 500}
                    if cursor:
                        params["cursor"] = cursor
                    page = (await http.get("/v1/invocations", params=params)).json()
                    items += page["items"]
                    cursor = page.get("next_cursor")
                    if not cursor:
                        return items

            items: list[dict[str, Any]] = []
            for _ in range(int(args.timeout / 0.5)):
                items = await succeeded()
                if len(items) >= phase.n:
                    break
                await asyncio.sleep(0.5)
            # How fast the dispatcher admitted (queued -> pending, then launch): the gateway's
            # own pace, apart from the Kubernetes side.
            dispatched = sorted(datetime.fromisoformat(i["timeline"]["dispatched"]) for i in items)
            if len(dispatched) > 1:
                phase.extra["dispatch_span_s"] = round((dispatched[-1] - dispatched[0]).total_seconds(), 2)
            phase.extra["gateway_all_succeeded_s"] = round(time.monotonic() - phase.t0, 2)
            phase.extra["gateway_cpu_s"] = round(sum(proc.cpu_times()[:2]) - cpu0, 1)
            scrape = (await http.get("/metrics")).text
            commits = {
                line.split()[0]: float(line.split()[1])
                for line in scrape.splitlines()
                if line.startswith(("eops_store_commit_writes_count", "eops_store_commit_writes_sum"))
            }
            phase.extra["gateway_store_commits"] = int(commits.get("eops_store_commit_writes_count", 0))
            phase.extra["gateway_store_writes"] = int(commits.get("eops_store_commit_writes_sum", 0))
            phase.extra["gateway_peak_rss_mib"] = peak_rss_mib(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)  # a graceful stop, so a profile gets written
        try:
            proc.wait(60)
        except psutil.TimeoutExpired:
            proc.kill()
        log.close()
        if args.gateway_log:
            shutil.copyfile(tmp / "gateway.log", args.gateway_log)


async def _send_with_h2load(phase: Phase, url: str, token: str, connections: int, tmp: Path) -> None:
    """The burst from h2load (nghttp2's C load generator, HTTP/1.1 here): exactly `phase.n`
    POSTs over `connections` keep-alive connections. The load generator shares the two cores
    with the gateway and the control plane; real clients would not, so it should take as little
    as it can (the aiohttp one took ~0.45 CPU-seconds of the window for 1,000 requests)."""
    body = tmp / "body.json"
    body.write_bytes(b'{"i": 1}')
    command = [
        *("h2load", "--h1", "-n", str(phase.n), "-c", str(connections), "-t", "1", "-m", "1"),
        *("-d", str(body), "-H", f"Authorization: Bearer {token}", "-H", "Content-Type: application/json"),
        f"{url}/v1/functions/burst/invocations",
    ]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    phase.start()
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out = (await proc.communicate())[0].decode(errors="replace")
    phase.extra["accept_s"] = round(time.monotonic() - phase.t0, 2)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # h2load is the only child that ends meanwhile; it has exited before the window's end
    # snapshot, so its CPU is taken from the children's usage instead.
    used = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    phase.extra["load_generator_cpu_s"] = round(used, 2)
    done = re.search(r"status codes: (\d+) 2xx", out)
    if proc.returncode != 0 or done is None or int(done.group(1)) != phase.n:
        raise RuntimeError(f"h2load did not get {phase.n} answers 2xx:\n{out[-2000:]}")


async def _send_with_aiohttp(phase: Phase, url: str, headers: dict[str, str], connections: int) -> None:
    """The burst from an aiohttp client in this process (when h2load is not installed)."""
    sent = iter(range(phase.n))
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(url, headers=headers, connector=connector) as load:

        async def client() -> None:
            for i in sent:
                async with load.post(
                    "/v1/functions/burst/invocations", data=b'{"i": %d}' % i, headers=JSON
                ) as r:
                    r.raise_for_status()

        phase.start()
        await asyncio.gather(*(client() for _ in range(connections)))
        phase.extra["accept_s"] = round(time.monotonic() - phase.t0, 2)


def peak_rss_mib(pid: int) -> float | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def gateway_ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def make_namespace(cluster: DevCluster, ns: str) -> None:
    with cluster.api() as api:
        api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.monotonic() + 60
        while not api.ok(f"/api/v1/namespaces/{ns}/serviceaccounts/default"):
            if time.monotonic() > deadline:
                raise TimeoutError("default service account")
            time.sleep(0.2)


def drop_namespace(cluster: DevCluster, ns: str, timeout: float) -> None:
    with cluster.api() as api:
        api.delete(f"/api/v1/namespaces/{ns}")
        deadline = time.monotonic() + timeout
        while api.ok(f"/api/v1/namespaces/{ns}") and time.monotonic() < deadline:
            time.sleep(1)


async def run_phase(
    cluster: DevCluster, name: str, args: argparse.Namespace, tmp: Path, n: int, tag: str
) -> Phase:
    ns = f"burst-{name}-{tag}"
    phase = Phase(name, n)
    if name in KUEUE_PHASES:
        gates = {MERGE_PATCH_GATE: name == "eops-kueue-merge"}
        phase.extra["kueue_gates"] = gates
        phase.extra["kueue_restart_s"] = round(cluster.set_kueue_feature_gates(gates), 1)
    make_namespace(cluster, ns)
    done = asyncio.Event()
    observer = asyncio.create_task(Observer(str(cluster.kubeconfig_path), ns, phase).run(done))
    await asyncio.sleep(1.0)  # the watches are listening before the first request
    cpu0 = psutil.cpu_times()
    if args.pprof_apiserver and tag != "warmup":
        for running in _PROFILES:  # one CPU profile at a time: Go refuses a second (a 500)
            running.join()
        where = Path(args.pprof_apiserver) / f"apiserver-{name}-{tag}.pprof"
        profile = threading.Thread(
            target=apiserver_profile, args=(cluster, where, args.pprof_seconds), daemon=True
        )
        _PROFILES[:] = [profile]
        profile.start()
    try:
        if name in ("ceiling", "ceiling-pods"):
            await run_ceiling(cluster, phase, ns, args)
        elif name == "naive":
            thread = threading.Thread(target=run_naive_sync, args=(cluster, phase, ns, args))
            thread.start()
            await asyncio.to_thread(thread.join)
        elif name in KUEUE_PHASES:
            with kueue_queue(cluster, ns, n):
                await run_eops(cluster, phase, ns, args, tmp)
                await wait_until(
                    lambda: phase.t_succeeded is not None, args.timeout, f"{name}: all succeeded"
                )
        else:
            await run_eops(cluster, phase, ns, args, tmp)
        await wait_until(lambda: phase.t_succeeded is not None, args.timeout, f"{name}: all succeeded")
    finally:
        done.set()
        await observer
    spent = cpu_spent(phase.cpu_at_start, cpu_by_process())
    phase.extra["phase_cpu_s"] = {k: round(v, 2) for k, v in sorted(spent.items()) if v >= 0.05}
    used = psutil.cpu_times()
    phase.extra["machine_cpu_s"] = round((used.user + used.system) - (cpu0.user + cpu0.system), 1)
    print(json.dumps(phase.summary()), flush=True)
    drop_namespace(cluster, ns, args.drain_timeout)
    return phase


_PROFILES: list[threading.Thread] = []


def apiserver_profile(cluster: DevCluster, where: Path, seconds: int) -> None:
    """The API server's CPU profile over the first `seconds` of a phase (its /debug/pprof, on by
    default: --profiling), written to `where` for `go tool pprof -top`."""
    url = f"{cluster.server}/debug/pprof/profile?seconds={seconds}"
    try:
        got = httpx.get(url, verify=cluster.credentials.ssl_context(), timeout=seconds + 60)
        got.raise_for_status()
    except httpx.HTTPError as exc:
        print(f"no API server profile for {where.name}: {exc}", file=sys.stderr, flush=True)
        return
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_bytes(got.content)


@contextlib.contextmanager
def kueue_queue(cluster: DevCluster, ns: str, t4s: int) -> Any:
    """`eops render kueue`'s objects for a queue of `t4s` T4s in `ns` (LocalQueue `eops`, no
    admission check), until the ClusterQueue is active; removed afterwards, last first."""
    inputs = KueueInputs(
        gpu_budget=f"nvidia-tesla-t4={t4s}", namespace=ns, cluster_queue=ns, provisioning_class="none"
    )
    manifests = kueue_manifests(inputs)
    with cluster.api() as api:
        for manifest in manifests:
            with contextlib.suppress(Conflict):  # cluster-scoped ones left by an earlier phase
                api.create(_kueue_path(manifest), manifest)
        deadline = time.monotonic() + 60
        queue = f"{KUEUE_API}/clusterqueues/{ns}"
        while not any(
            c.get("type") == "Active" and c.get("status") == "True"
            for c in (api.get(queue).get("status") or {}).get("conditions") or []
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"ClusterQueue {ns} not active within 60 s")
            time.sleep(0.5)
        try:
            yield
        finally:
            for manifest in reversed(manifests):
                with contextlib.suppress(NotFound):
                    api.delete(f"{_kueue_path(manifest)}/{manifest['metadata']['name']}")


def _kueue_path(manifest: dict[str, Any]) -> str:
    plural = manifest["kind"].lower() + ("es" if manifest["kind"].endswith("s") else "s")
    ns = manifest["metadata"].get("namespace")
    return f"{KUEUE_API}/namespaces/{ns}/{plural}" if ns else f"{KUEUE_API}/{plural}"


KUEUE_PHASES = ("eops-kueue", "eops-kueue-merge")
MERGE_PATCH_GATE = "WorkloadRequestUseMergePatch"


def machine() -> str:
    model = cpu_model() or "unknown CPU"
    mem = psutil.virtual_memory().total / 2**30
    return f"nproc={os.cpu_count()}, {model}, {mem:.0f} GiB RAM, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--invocations", type=int, default=200)
    ap.add_argument("--run-seconds", type=float, default=5.0)
    ap.add_argument("--phases", default="ceiling,naive,eops")
    ap.add_argument("--rounds", type=int, default=1, help="run the phases this many times, in turn")
    ap.add_argument("--warmup", type=int, default=100, help="invocations of an unreported first phase")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--drain-timeout", type=float, default=300.0)
    ap.add_argument(
        "--gateway-env",
        nargs="*",
        default=[],
        type=lambda s: tuple(s.split("=", 1)),
        help="extra KEY=VALUE for the gateway, e.g. EOPS_KUBE_QPS=400",
    )
    ap.add_argument(
        "--controller-qps",
        type=int,
        default=None,
        help="the controller-manager's client QPS (upstream's stock: 20; default: the dev cluster's 500)",
    )
    ap.add_argument("--controller-burst", type=int, default=None, help="its burst (upstream's stock: 30)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--connections", type=int, default=32, help="load generator connections (eops)")
    ap.add_argument(
        "--load",
        choices=["h2load", "aiohttp"],
        default="h2load" if shutil.which("h2load") else "aiohttp",
        help="eops load generator: h2load (apt-get install nghttp2-client; default when found) or aiohttp",
    )
    ap.add_argument("--spy-gateway", default="", help="py-spy the gateway's burst window into this file")
    ap.add_argument("--spy-seconds", type=int, default=8, help="how long --spy-gateway samples")
    ap.add_argument("--gateway-log", default="", help="keep a copy of the gateway's log here")
    ap.add_argument("--profile-gateway", default="", help="write a cProfile of the gateway here")
    ap.add_argument(
        "--pprof-apiserver",
        default="",
        metavar="DIR",
        help="write the API server's CPU profile of each phase's first --pprof-seconds into DIR "
        "(apiserver-PHASE-ROUND.pprof; read with `go tool pprof -top FILE`)",
    )
    ap.add_argument("--pprof-seconds", type=int, default=30, help="how long --pprof-apiserver samples")

    ap.add_argument(
        "--kueue", action="store_true", help="run Kueue beside the cluster (implied by eops-kueue)"
    )
    args = ap.parse_args()
    kueue = args.kueue or any(p in KUEUE_PHASES for p in args.phases.split(","))

    tc = ensure_built(allow_build=False, kueue=kueue)
    if kueue and tc.kueue is None:
        print("Kueue is not built: run `eops dev-cluster build --kueue` first", file=sys.stderr)
        return 2
    # The GPU nodes are the static pool: the burst measures the gateway, not node provisioning.
    knobs = dataclasses.replace(AutoscalerSettings.for_benchmarks(args.nodes), enabled=False)
    results: list[Phase] = []
    with tempfile.TemporaryDirectory(prefix="eops-burst-") as name:
        tmp = Path(name)
        cluster = DevCluster.start(
            ClusterConfig(
                state_dir=tmp / "cluster",
                autoscaler=knobs,
                node_heartbeat_seconds=100,
                kueue=kueue,
                controller_manager_qps=args.controller_qps,
                controller_manager_burst=args.controller_burst,
            ),
            tc,
        )
        try:
            t0 = time.monotonic()
            cluster.set_baseline(args.nodes, timeout=max(120.0, args.nodes / 5))
            print(f"{args.nodes} GPU nodes ready in {time.monotonic() - t0:.0f}s", flush=True)
            with cluster.api() as api:
                for pc in priority_classes():
                    with contextlib.suppress(Conflict):  # left by an earlier run
                        api.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc)
            if args.warmup:
                # The first phase after the nodes appear ran slower whichever way it was (cold
                # caches, node status churn): warm the cluster up first, not reported.
                (tmp / "warmup").mkdir()
                asyncio.run(run_phase(cluster, "ceiling", args, tmp / "warmup", args.warmup, "warmup"))
            for round_no in range(1, args.rounds + 1):
                order = args.phases.split(",")
                if round_no % 2 == 0:
                    # Every other round in reverse, so no way always runs right after another
                    # (a phase ran slower after some than after others).
                    order.reverse()
                for phase_name in order:
                    where = tmp / f"{phase_name}-{round_no}"
                    where.mkdir()
                    phase = asyncio.run(
                        run_phase(cluster, phase_name, args, where, args.invocations, str(round_no))
                    )
                    phase.extra["round"] = round_no
                    results.append(phase)
        finally:
            cluster.stop()
    out = {
        "machine": machine(),
        "nodes": args.nodes,
        "run_seconds": args.run_seconds,
        "gateway_env": dict(args.gateway_env),
        "controller_manager_client": [args.controller_qps, args.controller_burst],
        "load_generator": args.load,
        "phases": [p.summary() for p in results],
    }
    print(json.dumps(out, indent=2))
    if args.markdown:
        print("\n| way | Jobs created (s) | Jobs/s | all pods started (s) | all succeeded (s) | notes |")
        print("|---|---|---|---|---|---|")
        for p in results:
            s = p.summary()
            notes = ", ".join(f"{k} {v}" for k, v in s.items() if k.startswith("gateway_") or k == "accept_s")
            print(
                f"| {p.name} | {s['all_jobs_created_s']} | {s['jobs_per_s']} | {s['all_pods_started_s']} | "
                f"{s['all_succeeded_s']} | {notes} |"
            )
        rates: dict[str, list[float]] = {}
        for p in results:
            if p.t_jobs:
                rates.setdefault(p.name, []).append(p.n / p.t_jobs)
        mean = {name: sum(r) / len(r) for name, r in rates.items()}
        print()
        print("mean Jobs/s: " + ", ".join(f"{name} {rate:.1f}" for name, rate in mean.items()))
        if {"eops", "ceiling", "naive"} <= mean.keys():
            print(
                f"eops: {mean['eops'] / mean['ceiling']:.0%} of the ceiling, "
                f"{mean['eops'] / mean['naive']:.1f}x naive"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
