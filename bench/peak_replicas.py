#!/usr/bin/env python3
"""The peak through gateway replicas (issue 16): a burst of invocations into a dev cluster with
no GPU node, upstream's cluster-autoscaler adding one per pending pod, served by N
`eops serve --backend kubernetes --leader-elect` replicas on one PostgreSQL.

    .venv/bin/python bench/peak_replicas.py                    # quick: 200 invocations
    .venv/bin/python bench/peak_replicas.py --invocations 4000 --markdown
    .venv/bin/python bench/peak_replicas.py --invocations 1000 --kill-leader   # the leader SIGKILLed

Prerequisites: the dev cluster's binaries with the autoscaler (`scripts/build-devcluster`),
PostgreSQL (`apt-get install -y postgresql`; a throwaway server is started as the tests do) and
h2load (`apt-get install -y nghttp2-client`).

In one run on one cluster:
1. the API server's ceiling: the same Job (or bare Pod) + payload Secret creates as the gateway
   makes, from a tight loop of 64 in flight, held (Jobs suspended, pods behind a scheduling gate)
   so no node is asked for; that namespace is deleted before the burst;
2. the burst: one h2load per replica, the invocations split between them (with --kill-leader all
   go through the follower, and the leader is SIGKILLed once a third of the Jobs exist);
3. timed by watches on Jobs, pods and nodes, from the first request: all accepted (every 202
   answered), all Jobs created, all pods created, all pods running, the last new node Ready with
   its GPU, all pods succeeded, all invocations succeeded in the gateway's view, and every new
   node removed again (scale-down); Jobs per second beside the ceiling; each replica's CPU seconds
   and peak RSS; that no invocation had two Jobs (uids per name) and none is left behind;
4. where pods wait after their node: each pod's binding, the end of the pod before it on the
   same node (a node reused once its first pod ended), nodes added that never ran a pod, and
   kube-scheduler's own queue from its /metrics (pending per queue, unschedulable per plugin,
   moves by event; `UnschedulableTimeout` counts its 5-minute flush). `--keep-logs DIR` also
   keeps the control plane's logs (the autoscaler's scale-up plans and loop times).

The autoscaler's own provisioning time is taken from the same run: from the first pod created
(demand visible) to the last added node Ready with its GPU. The issue's goal is all pods
running within that plus 30 s of the first request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import ssl
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.watch import KindWatch
from elasticityops.devcluster.build import ensure_built
from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.kwok_provider import NOT_READY_TAINT
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL, node_ready
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import Conflict
from k8s_burst import (
    Observer,
    Phase,
    drop_namespace,
    free_port,
    machine,
    make_namespace,
    peak_rss_mib,
    run_ceiling,
    spec,
    wait_until,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))  # the throwaway PostgreSQL of the tests

from helpers.pg_cluster import fresh_database, pg_cluster  # noqa: E402


@dataclass
class Peak:
    """What the watches saw of the burst, in seconds from its first request."""

    n: int
    workload: str
    t0: float = 0.0
    uids: dict[str, set[str]] = field(default_factory=dict)  # Job (or bare pod) name -> uids seen
    pods: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)
    node_seen: dict[str, float] = field(default_factory=dict)
    node_gpu: dict[str, float] = field(default_factory=dict)  # Ready with nvidia.com/gpu allocatable
    # ... and its not-ready taint lifted: the node lifecycle controller's doing, through the
    # controller-manager's client, so at the stock 20 QPS it can trail Ready by many seconds.
    node_untainted: dict[str, float] = field(default_factory=dict)
    nodes_now: set[str] = field(default_factory=set)
    most_nodes: int = 0
    first_pod: float | None = None
    pod_created: dict[str, float] = field(default_factory=dict)
    pod_node: dict[str, str] = field(default_factory=dict)
    pod_bound: dict[str, float] = field(default_factory=dict)  # first seen with a nodeName
    pod_ended: dict[str, float] = field(default_factory=dict)  # first seen Succeeded or Failed
    pod_running: dict[str, float] = field(default_factory=dict)
    t: dict[str, float] = field(default_factory=dict)

    def since(self) -> float:
        return time.monotonic() - self.t0

    def stamp(self, what: str, count: int) -> None:
        if self.t0 and what not in self.t and count >= self.n:
            self.t[what] = self.since()

    async def on_job(self, kind: str, obj: dict[str, Any]) -> None:
        if kind != "DELETED":
            meta = obj["metadata"]
            self.uids.setdefault(meta["name"], set()).add(meta.get("uid", ""))
            self.stamp("all_jobs_created", len(self.uids))

    async def on_pod(self, kind: str, obj: dict[str, Any]) -> None:
        if not self.t0:
            return
        if self.workload == "pod":
            await self.on_job(kind, obj)
        name = obj["metadata"]["name"]
        self.pods.add(name)
        if self.first_pod is None:
            self.first_pod = self.since()
        self.pod_created.setdefault(name, self.since())
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            self.pod_node[name] = node
            self.pod_bound.setdefault(name, self.since())
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded", "Failed"):
            self.running.add(name)
            self.pod_running.setdefault(name, self.since())
        if phase in ("Succeeded", "Failed"):
            self.pod_ended.setdefault(name, self.since())
        if phase == "Succeeded":
            self.succeeded.add(name)
        self.stamp("all_pods_created", len(self.pods))
        self.stamp("all_pods_running", len(self.running))
        self.stamp("all_pods_succeeded", len(self.succeeded))

    async def on_node(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.nodes_now.discard(name)
            if self.t0 and not self.nodes_now and self.node_seen and "all_pods_succeeded" in self.t:
                self.t.setdefault("all_nodes_removed", self.since())
            return
        self.nodes_now.add(name)
        self.most_nodes = max(self.most_nodes, len(self.nodes_now))
        self.node_seen.setdefault(name, self.since())
        allocatable = (obj.get("status") or {}).get("allocatable") or {}
        if node_ready(obj) and allocatable.get(GPU_RESOURCE, "0") != "0":
            self.node_gpu.setdefault(name, self.since())
            taints = (obj.get("spec") or {}).get("taints") or []
            if not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
                self.node_untainted.setdefault(name, self.since())

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: round(v, 1) for k, v in sorted(self.t.items(), key=lambda kv: kv[1])}
        created = self.t.get("all_jobs_created")
        out["jobs_per_s"] = round(self.n / created, 1) if created else None
        out["nodes_added"] = len(self.node_seen)
        out["most_nodes_at_once"] = self.most_nodes
        if self.node_gpu:
            out["last_node_gpu_ready"] = round(max(self.node_gpu.values()), 1)
            if self.first_pod is not None:
                # The autoscaler's own provisioning time for this burst: from the first pod it
                # could see to the last node it added able to take one.
                out["first_pod_created"] = round(self.first_pod, 2)
                out["autoscaler_provisioning_s"] = round(max(self.node_gpu.values()) - self.first_pod, 1)

        if self.node_untainted:
            out["last_node_untainted"] = round(max(self.node_untainted.values()), 1)
            out |= _quantiles(
                "taint_lift",
                # A node is stamped untainted only once it is Ready with its GPU (on_node).
                sorted(t - self.node_gpu[n] for n, t in self.node_untainted.items()),
            )

        # What follows a pod's node: from the later of the pod's creation and its node's GPU
        # being allocatable, to the pod seen running (scheduler, kwok, the watch). The
        # autoscaler's own time is what comes before; the goal is this share <= 30 s.
        def node_ready_for(pod: str) -> float:
            return max(self.pod_created[pod], self.node_gpu.get(self.pod_node.get(pod, ""), 0.0))

        after = sorted(
            t - node_ready_for(pod) for pod, t in self.pod_running.items() if pod in self.pod_created
        )
        out |= _quantiles("after_node", after)
        # Split at the binding: the scheduler's share (node ready -> bound) and kwok's (bound ->
        # running, its pod stage plus the watch).
        bound = [
            (pod, t - node_ready_for(pod)) for pod, t in self.pod_bound.items() if pod in self.pod_created
        ]
        out |= _quantiles("node_to_bound", sorted(w for _, w in bound))
        out |= _quantiles(
            "bound_to_running",
            sorted(self.pod_running[p] - t for p, t in self.pod_bound.items() if p in self.pod_running),
        )
        # From when the pod's node was free for it: its GPU allocatable, or, on a node that ran
        # another pod first (one the autoscaler did not add a node for), that pod's end.
        on_node: dict[str, list[str]] = {}
        for pod, node in self.pod_node.items():
            on_node.setdefault(node, []).append(pod)
        after_free = []
        for pod, t in self.pod_running.items():
            node = self.pod_node.get(pod, "")
            if pod not in self.pod_created or node not in self.node_gpu:
                continue
            bound_at = self.pod_bound.get(pod, t)
            ends = (self.pod_ended.get(q, bound_at + 1) for q in on_node.get(node, ()) if q != pod)
            before = [e for e in ends if e <= bound_at]
            free = max([self.node_gpu[node], *before])
            after_free.append(t - max(self.pod_created[pod], free))
        out |= _quantiles("after_free", sorted(after_free))
        late = [pod for pod, w in bound if w > 60]
        if late:
            # When the pods bound a minute or more after their node could take them were made,
            # and when they were bound: whether they share a moment of the burst.
            out["bound_late"] = {
                "count": len(late),
                "created_s": _quantiles("", sorted(self.pod_created[p] for p in late)),
                "bound_s": _quantiles("", sorted(self.pod_bound[p] for p in late)),
                "node_ready_s": _quantiles(
                    "", sorted(self.node_gpu.get(self.pod_node.get(p, ""), 0.0) for p in late)
                ),
            }
        last = max(self.pod_running, key=lambda pod: self.pod_running[pod], default=None)
        if last is not None and self.pod_node.get(last) in self.node_gpu:
            # The last pod to run: when its node could take it, and how long it then took.
            out["last_pod_node_gpu_ready"] = round(self.node_gpu[self.pod_node[last]], 1)
        # A node that ran one pod after another (a pod waited for a finished one), and nodes
        # added that never ran one (removed unneeded after --scale-down-after).
        out["nodes_reused"] = sum(1 for pods in on_node.values() if len(pods) > 1)
        out["nodes_never_used"] = len(set(self.node_seen) - set(on_node))
        out["most_uids_per_name"] = max((len(u) for u in self.uids.values()), default=0)
        return out


def _quantiles(name: str, values: list[float]) -> dict[str, float]:
    """p50, p95 and max of sorted `values`, keyed `{name}_p50_s` ... (none for no values)."""
    if not values:
        return {}
    key = f"{name}_" if name else ""
    return {
        f"{key}p50_s": round(values[len(values) // 2], 1),
        f"{key}p95_s": round(values[int(0.95 * (len(values) - 1))], 1),
        f"{key}max_s": round(values[-1], 1),
    }


class SchedulerQueue:
    """kube-scheduler's own view of its queue, from its /metrics (the admin client certificate
    is authorised there): pods pending per queue (active, backoff, unschedulable, gated) and
    unschedulable pods per plugin that rejected them, sampled every few seconds; and at the end
    how many pods each event moved into which queue (`UnschedulableTimeout` is the 5-minute
    flush of pods no event moved)."""

    def __init__(self, cluster: DevCluster) -> None:
        creds = cluster.credentials
        self.url = f"https://127.0.0.1:{cluster.state.ports.scheduler}/metrics"
        # The scheduler's serving certificate is self-signed for the dev cluster: not checked.
        self.tls = ssl.create_default_context()
        self.tls.check_hostname = False
        self.tls.verify_mode = ssl.CERT_NONE
        self.tls.load_cert_chain(creds.client_cert, creds.client_key)
        self.samples: list[dict[str, Any]] = []
        self.error = ""

    def read(self) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        from prometheus_client.parser import text_string_to_metric_families

        answer = httpx.get(self.url, verify=self.tls, timeout=10)
        answer.raise_for_status()
        out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for family in text_string_to_metric_families(answer.text):
            for s in family.samples:
                out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
        return out

    def sample(self, at: float) -> None:
        try:
            m = self.read()
        except (httpx.HTTPError, ValueError) as e:
            self.error = repr(e)
            return
        row: dict[str, Any] = {"t_s": round(at, 1)}
        for labels, v in m.get("scheduler_pending_pods", {}).items():
            row["pending_" + dict(labels).get("queue", "")] = v
        for labels, v in m.get("scheduler_unschedulable_pods", {}).items():
            if v:
                row["unschedulable_by_" + dict(labels).get("plugin", "")] = v
        self.samples.append(row)

    def moves(self) -> dict[str, float]:
        """Pods moved into a queue, by event: `{event} -> {queue}`."""
        try:
            m = self.read()
        except (httpx.HTTPError, ValueError) as e:
            return {"error": repr(e)}  # type: ignore[dict-item]
        out = {}
        for labels, v in m.get("scheduler_queue_incoming_pods_total", {}).items():
            d = dict(labels)
            out[f"{d.get('event')} -> {d.get('queue')}"] = v
        for labels, v in m.get("scheduler_schedule_attempts_total", {}).items():
            out[f"attempts {dict(labels).get('result')}"] = v
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


class Replica:
    """One `eops serve --leader-elect` process, stopped by its PID."""

    def __init__(
        self, name: str, cluster: DevCluster, ns: str, database: str, where: Path, env: dict[str, str]
    ):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = where / name
        self.log_path = where / f"{name}.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}
        base.update(
            {
                "PYTHONUNBUFFERED": "1",
                "EOPS_LEADER_ELECT": "true",
                "EOPS_LEADER_IDENTITY": name,
                "EOPS_DATABASE_URL": database,
                **env,
            }
        )
        self.log = self.log_path.open("wb")
        command = [sys.executable, "-m", "elasticityops.cli.main", "serve", "--backend", "kubernetes"]
        command += ["--kubeconfig", str(cluster.kubeconfig_path), "--namespace", ns]
        command += ["--data-dir", str(self.data), "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = psutil.Popen(command, stdout=self.log, stderr=self.log, env=base, cwd=REPO)
        self.cpu0 = 0.0
        self.peak_sampled_mib = 0.0
        self.killed = False

    @property
    def token(self) -> str:
        return (self.data / "admin-token").read_text().strip()

    def role(self) -> str:
        try:
            answer = httpx.get(self.url + "/readyz", timeout=2)
        except httpx.HTTPError:
            return ""
        return str(answer.json().get("role", "")) if answer.status_code == 200 else ""

    def cpu(self) -> float:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = self.proc.cpu_times()
            self.last_cpu = times.user + times.system
        return getattr(self, "last_cpu", 0.0)

    def sample(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self.peak_sampled_mib = max(self.peak_sampled_mib, self.proc.memory_info().rss / 2**20)

    def kill(self) -> None:
        self.cpu()
        self.hwm = peak_rss_mib(self.proc.pid)
        self.proc.kill()
        self.proc.wait(30)
        self.killed = True

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cpu_s": round(self.cpu() - self.cpu0, 1)}
        out["peak_rss_mib"] = getattr(self, "hwm", None) if self.killed else peak_rss_mib(self.proc.pid)
        out["killed"] = self.killed
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except psutil.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        return out


async def h2load(replica: Replica, n: int, connections: int, body: Path) -> float:
    """Send `n` invocations to `replica`; the monotonic time the last answer came."""
    command = ["h2load", "--h1", "-n", str(n), "-c", str(connections), "-t", "1", "-m", "1", "-d", str(body)]
    command += ["-H", f"Authorization: Bearer {replica.token}", "-H", "Content-Type: application/json"]
    command.append(f"{replica.url}/v1/functions/burst/invocations")
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out = (await proc.communicate())[0].decode(errors="replace")
    if proc.returncode != 0 or f"status codes: {n} 2xx" not in out:
        raise RuntimeError(f"h2load did not get {n} answers 2xx from {replica.name}:\n{out[-2000:]}")
    return time.monotonic()


async def gateway_succeeded(replica: Replica, target: int, limit_s: float) -> int:
    """How many invocations the replica's API reports succeeded, polled until all or timeout."""
    deadline = time.monotonic() + limit_s
    async with httpx.AsyncClient(
        base_url=replica.url, headers={"Authorization": f"Bearer {replica.token}"}, timeout=60
    ) as http:
        while True:
            count, cursor = 0, None
            while True:
                params: dict[str, Any] = {"state": "succeeded", "limit": 500, "function": "burst"}
                if cursor:
                    params["cursor"] = cursor
                page = (await http.get("/v1/invocations", params=params)).json()
                count += len(page["items"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            if count >= target or time.monotonic() > deadline:
                return count
            await asyncio.sleep(1.0)


async def ceiling(cluster: DevCluster, args: argparse.Namespace) -> dict[str, Any]:
    name = "ceiling-pods" if args.workload == "pod" else "ceiling"
    ns = f"peak-{name}"
    make_namespace(cluster, ns)
    phase = Phase(name, args.invocations)
    done = asyncio.Event()
    observer = asyncio.create_task(Observer(str(cluster.kubeconfig_path), ns, phase).run(done))
    await asyncio.sleep(1.0)
    try:
        await run_ceiling(cluster, phase, ns, args, hold=True)
        await wait_until(lambda: phase.t_jobs is not None, args.timeout, "ceiling: all created")
    finally:
        done.set()
        await observer
    drop_namespace(cluster, ns, args.timeout)
    return {
        "created_s": round(phase.t_jobs or 0, 2),
        "per_s": round(args.invocations / (phase.t_jobs or 1), 1),
    }


async def burst(cluster: DevCluster, args: argparse.Namespace, database: str, where: Path) -> dict[str, Any]:
    ns = "peak"
    make_namespace(cluster, ns)
    env = dict(args.gateway_env)
    if args.workload == "pod":
        env["EOPS_KUBE_WORKLOAD"] = "pod"
    replicas = [Replica(f"gw-{i}", cluster, ns, database, where, env) for i in range(args.replicas)]
    peak = Peak(args.invocations, args.workload)
    api = KubeApi.connect(
        KubernetesSettings(kubeconfig=str(cluster.kubeconfig_path), namespace=ns, qps=1e6, burst=10**6)
    )
    clock = SystemClock()
    watches = [
        KindWatch(api, f"/apis/batch/v1/namespaces/{ns}/jobs", {}, peak.on_job, clock),
        KindWatch(api, f"/api/v1/namespaces/{ns}/pods", {}, peak.on_pod, clock),
        KindWatch(
            api, "/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"}, peak.on_node, clock
        ),
    ]
    tasks = [asyncio.create_task(w.run()) for w in watches]
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.wait(1.0):
            for r in replicas:
                r.sample()

    queue = SchedulerQueue(cluster)
    queue_stop = asyncio.Event()

    async def sample_queue() -> None:
        while not queue_stop.is_set():
            if peak.t0:
                await asyncio.to_thread(queue.sample, peak.since())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(queue_stop.wait(), 5.0)

    tasks.append(asyncio.create_task(sample_queue()))
    sampler = threading.Thread(target=sample, daemon=True)
    out: dict[str, Any] = {}
    try:
        for r in replicas:
            await wait_until(
                lambda r=r: r.role() in ("leader", "follower") or r.proc.poll() is not None, 120, r.name
            )
            if r.proc.poll() is not None:
                raise RuntimeError(f"{r.name} exited:\n{r.log_path.read_text(errors='replace')[-3000:]}")
        await wait_until(lambda: sum(r.role() == "leader" for r in replicas) == 1, 60, "one leader")
        leader = next(r for r in replicas if r.role() == "leader")
        followers = [r for r in replicas if r is not leader]
        answer = await asyncio.to_thread(
            httpx.put,
            f"{leader.url}/v1/functions/burst",
            json=spec(args.run_seconds, args.invocations).model_dump(mode="json"),
            headers={"Authorization": f"Bearer {leader.token}"},
            timeout=60,
        )
        answer.raise_for_status()
        body = where / "body.json"
        body.write_bytes(b'{"i": 1}')
        targets = followers[:1] if args.kill_leader else replicas
        shares = [
            args.invocations // len(targets) + (i < args.invocations % len(targets))
            for i in range(len(targets))
        ]
        await asyncio.sleep(1.0)  # the watches are listening
        for r in replicas:
            r.cpu0 = r.cpu()
        sampler.start()
        peak.t0 = time.monotonic()
        loads = [
            asyncio.create_task(h2load(r, k, args.connections, body))
            for r, k in zip(targets, shares, strict=True)
        ]
        if args.kill_leader:
            await wait_until(
                lambda: len(peak.uids) >= args.invocations // 3, args.timeout, "a third of the Jobs"
            )
            leader.kill()
            out["leader_killed_at_s"] = round(peak.since(), 1)
            out["jobs_when_killed"] = len(peak.uids)
            survivor = followers[0]
            await wait_until(lambda: survivor.role() == "leader", 120, "the follower to lead")
            out["follower_leads_at_s"] = round(peak.since(), 1)
        peak.t["all_accepted"] = max(await asyncio.gather(*loads)) - peak.t0
        print(f"all {args.invocations} accepted in {peak.t['all_accepted']:.1f}s", flush=True)
        last = [0.0]

        def progress() -> bool:
            if time.monotonic() - last[0] > 30:
                last[0] = time.monotonic()
                print(
                    f"  {peak.since():.0f}s: {len(peak.uids)} created, {len(peak.running)} running, "
                    f"{len(peak.succeeded)} succeeded, {len(peak.nodes_now)} nodes",
                    flush=True,
                )
            return "all_pods_succeeded" in peak.t

        await wait_until(progress, args.timeout, "all pods succeeded")
        alive = next(r for r in replicas if not r.killed)
        seen = await gateway_succeeded(alive, args.invocations, args.timeout)
        peak.t["gateway_all_succeeded"] = peak.since()
        out["gateway_succeeded"] = seen
        for r in replicas:
            r.cpu()
        out["replicas"] = {}
        with contextlib.suppress(TimeoutError):
            await wait_until(
                lambda: "all_nodes_removed" in peak.t or not peak.nodes_now,
                args.scale_down_timeout,
                "scale-down",
            )
        out["nodes_left"] = len(peak.nodes_now)
        out["scheduler_moves"] = await asyncio.to_thread(queue.moves)
        jobs, _ = await api.list(f"/apis/batch/v1/namespaces/{ns}/jobs", {})
        pods, _ = await api.list(f"/api/v1/namespaces/{ns}/pods", {})
        # Finished ones wait for their TTL (EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS); one not
        # finished after every invocation ended would be left behind.
        out["jobs_unfinished"] = sum(1 for j in jobs if not _finished(j.get("status") or {}))
        out["pods_unfinished"] = sum(
            1 for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
    finally:
        stop_sampling.set()
        queue_stop.set()
        if args.keep_logs:
            (Path(args.keep_logs) / "scheduler-queue.json").write_text(
                json.dumps({"samples": queue.samples, "error": queue.error}, indent=1)
            )
        out["scheduler_queue_peaks"] = _peaks(queue.samples)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await api.close()
        out.setdefault("replicas", {})
        for r in replicas:
            out["replicas"][r.name] = {**r.stop(), "peak_rss_sampled_mib": round(r.peak_sampled_mib, 1)}
        if args.keep_logs:
            for r in replicas:
                shutil.copyfile(r.log_path, Path(args.keep_logs) / f"{r.name}.log")
    return {**peak.summary(), **out}


def _peaks(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each queue series' largest value and when it was last above zero."""
    out: dict[str, Any] = {}
    for key in sorted({k for row in samples for k in row} - {"t_s"}):
        values = [(row["t_s"], row.get(key, 0)) for row in samples]
        out[key] = {
            "most": max(v for _, v in values),
            "last_nonzero_s": max((t for t, v in values if v), default=None),
        }
    return out


def _finished(status: dict[str, Any]) -> bool:
    return bool(status.get("succeeded") or status.get("failed"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--invocations", type=int, default=200)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--workload", choices=["job", "pod"], default="job", help="EOPS_KUBE_WORKLOAD")
    ap.add_argument("--run-seconds", type=float, default=300.0, help="each pod's run time on kwok")
    ap.add_argument("--provision-delay", default="fixed:5", help="a new node's boot delay")
    ap.add_argument("--driver-delay", default="fixed:0", help="a new node's GPU driver delay")
    ap.add_argument(
        "--scale-down-after", type=float, default=60.0, help="s a node is unneeded before removal"
    )
    ap.add_argument(
        "--balance-zones",
        action="store_true",
        help="spread one scale-up over the zone groups (GKE's BALANCED location policy)",
    )
    ap.add_argument(
        "--max-nodes-per-scaleup", type=int, default=1000, help="the most nodes one scale-up adds"
    )
    ap.add_argument(
        "--max-binpacking-s",
        type=float,
        default=10.0,
        help="s of binpacking per node group in one scale-up (upstream's 10 s caps the estimate)",
    )
    ap.add_argument("--scale-down-parallelism", type=int, default=500, help="nodes removed at once at most")
    ap.add_argument("--scale-down-timeout", type=float, default=900.0, help="s to wait for every node gone")
    ap.add_argument("--job-workers", type=int, default=5, help="controller-manager --concurrent-job-syncs")
    ap.add_argument(
        "--controller-qps", type=int, default=None, help="the controller-manager's QPS (stock: 20)"
    )
    ap.add_argument("--controller-burst", type=int, default=None, help="its burst (stock: 30)")
    ap.add_argument("--connections", type=int, default=32, help="h2load connections per replica")
    ap.add_argument(
        "--kill-leader", action="store_true", help="burst through the follower, SIGKILL the leader"
    )
    ap.add_argument("--no-ceiling", action="store_true", help="skip the API server's ceiling")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--gateway-env", nargs="*", default=[], type=lambda s: tuple(s.split("=", 1)))
    ap.add_argument("--keep-logs", default="", help="copy the replicas' logs into this directory")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not shutil.which("h2load"):
        print("h2load is missing: apt-get install -y nghttp2-client", file=sys.stderr)
        return 2
    if args.keep_logs:
        # Made now, not at the end: a run that cannot write its logs there must not lose its
        # figures after 15 minutes (one did, writing the scheduler's queue into a missing dir).
        Path(args.keep_logs).mkdir(parents=True, exist_ok=True)

    tc = ensure_built(allow_build=False, autoscaler="required")
    knobs = dataclasses.replace(
        AutoscalerSettings.for_benchmarks(args.invocations),
        provision_delay=args.provision_delay,
        driver_delay=args.driver_delay,
        scale_down_after=args.scale_down_after,
        max_scale_down_parallelism=args.scale_down_parallelism,
        balance_zones=args.balance_zones,
        max_nodes_per_scaleup=args.max_nodes_per_scaleup,
        max_binpacking_s=args.max_binpacking_s,
    ).validated()
    config: dict[str, Any] = {
        "machine": machine(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "invocations": args.invocations,
        "replicas": args.replicas,
        "workload": args.workload,
        "run_seconds": args.run_seconds,
        "kill_leader": args.kill_leader,
        "autoscaler": {
            k: getattr(knobs, k)
            for k in ("max_nodes", "scan_interval", "provision_delay", "driver_delay", "scale_down_after")
        }
        | {
            "max_scale_down_parallelism": knobs.max_scale_down_parallelism,
            "balance_zones": knobs.balance_zones,
            "max_nodes_per_scaleup": knobs.max_nodes_per_scaleup,
            "max_binpacking_s": knobs.max_binpacking_s,
        },
        "job_workers": args.job_workers,
        "controller_manager_client": [args.controller_qps or 500, args.controller_burst or 1000],
        "gateway_env": dict(args.gateway_env),
    }
    print(json.dumps(config), flush=True)
    with tempfile.TemporaryDirectory(prefix="eops-peak-") as name, pg_cluster() as pg:
        where = Path(name)
        database = fresh_database(pg)
        cluster = DevCluster.start(
            ClusterConfig(
                state_dir=where / "cluster",
                autoscaler=knobs,
                node_heartbeat_seconds=100,
                job_workers=args.job_workers,
                controller_manager_qps=args.controller_qps,
                controller_manager_burst=args.controller_burst,
            ),
            tc,
        )
        try:
            with cluster.api() as api:
                for pc in priority_classes():
                    with contextlib.suppress(Conflict):
                        api.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc)
            result: dict[str, Any] = {}
            if not args.no_ceiling:
                result["ceiling"] = asyncio.run(ceiling(cluster, args))
                print(json.dumps({"ceiling": result["ceiling"]}), flush=True)
            result["burst"] = asyncio.run(burst(cluster, args, database, where))
        finally:
            cluster.stop()
            if args.keep_logs:
                # The control plane's own logs (scheduler, kwok, autoscaler), for what the
                # figures do not say.
                shutil.copytree(cluster.layout.logs, Path(args.keep_logs) / "cluster", dirs_exist_ok=True)
    print(json.dumps({**config, **result}, indent=2))
    if args.markdown:
        print(markdown(result, args))
    b = result["burst"]
    ok = (
        b.get("gateway_succeeded") == args.invocations
        and b["most_uids_per_name"] == 1
        and not b["jobs_unfinished"]
    )
    return 0 if ok else 1


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    b = result["burst"]
    ceiling_rate = (result.get("ceiling") or {}).get("per_s")
    rows = [
        ("all accepted", b.get("all_accepted")),
        ("all Jobs created", b.get("all_jobs_created") if args.workload == "job" else None),
        ("all pods created", b.get("all_pods_created")),
        ("last new node Ready with its GPU", b.get("last_node_gpu_ready")),
        ("the last pod's node Ready with its GPU", b.get("last_pod_node_gpu_ready")),
        ("last new node's not-ready taint lifted", b.get("last_node_untainted")),
        ("all pods running", b.get("all_pods_running")),
        ("all pods succeeded", b.get("all_pods_succeeded")),
        ("all invocations succeeded (gateway)", b.get("gateway_all_succeeded")),
        ("every new node removed", b.get("all_nodes_removed")),
    ]
    shown = [f"| {k} | {v} |" for k, v in rows if v is not None]
    lines = ["| from the first request | s |", "|---|---|", *shown]
    lines.append("")
    lines.append(
        f"created {b.get('jobs_per_s')}/s beside the API server's ceiling {ceiling_rate}/s; nodes added "
        f"{b.get('nodes_added')} (most at once {b.get('most_nodes_at_once')}); the autoscaler's own "
        f"provisioning {b.get('autoscaler_provisioning_s')} s; a pod's node ready to the pod running "
        f"p50 {b.get('after_node_p50_s')} s, p95 {b.get('after_node_p95_s')} s, "
        f"max {b.get('after_node_max_s')} s; from its node free for it (ready, or its previous pod "
        f"ended) p50 {b.get('after_free_p50_s')} s, p95 {b.get('after_free_p95_s')} s, "
        f"max {b.get('after_free_max_s')} s; nodes reused {b.get('nodes_reused')}, never used "
        f"{b.get('nodes_never_used')} (node ready to bound p50 {b.get('node_to_bound_p50_s')} s, "
        f"p95 {b.get('node_to_bound_p95_s')} s; bound to running p50 {b.get('bound_to_running_p50_s')} s, "
        f"p95 {b.get('bound_to_running_p95_s')} s); "
        f"replicas {json.dumps(b.get('replicas'))}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
