"""The scale run: N simulated T4 nodes, P single-GPU Jobs to completion, time/CPU/memory measured.

Used by `bench/devcluster_scale.py` (the 4,000-node benchmark) and by the test suite with a
CI-sized count. Two ways to get the nodes: `baseline` (the static pool is resized to N) or
`autoscale` (a cluster started with no baseline and quota N: upstream's cluster-autoscaler adds a
node per pending pod).
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psutil

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.devcluster.cluster import DevCluster, nodes_of, wait_for_nodes
from elasticityops.devcluster.errors import DevClusterError
from elasticityops.devcluster.nodes import (
    ROLE_AUTOSCALED,
    ROLE_BASELINE,
    node_ready,
)
from elasticityops.devcluster.stuck import GUARD_BOUND_S, list_bound_pending
from elasticityops.devcluster.workloads import gpu_job
from elasticityops.domain.errors import Conflict, EopsError


@dataclass
class ScaleResult:
    nodes: int
    pods: int
    mode: str
    run_seconds: float
    nodes_ready_s: float = 0.0
    submit_s: float = 0.0
    all_done_s: float = 0.0  # from first submission to the last Job complete
    total_s: float = 0.0
    succeeded: int = 0
    autoscaled_nodes: int = 0  # autoscale mode: nodes the autoscaler added
    nodes_removed_s: float = 0.0  # autoscale mode with scale-down: last Job done to no node left
    stuck_pods_max: int = 0  # most pods seen bound to a Ready node and Pending > 60 s (issue 14)
    longest_bound_pending_s: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)  # per component, over the run
    peak_rss_mib: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": self.pods,
            "mode": self.mode,
            "run_seconds": self.run_seconds,
            "nodes_ready_s": round(self.nodes_ready_s, 1),
            "submit_s": round(self.submit_s, 1),
            "all_done_s": round(self.all_done_s, 1),
            "total_s": round(self.total_s, 1),
            "succeeded": self.succeeded,
            "autoscaled_nodes": self.autoscaled_nodes,
            "nodes_removed_s": round(self.nodes_removed_s, 1),
            "stuck_pods_max": self.stuck_pods_max,
            "longest_bound_pending_s": round(self.longest_bound_pending_s, 1),
            "cpu_s": {k: round(v, 1) for k, v in self.cpu_s.items()},
            "cpu_s_total": round(sum(self.cpu_s.values()), 1),
            "peak_rss_mib": {k: round(v) for k, v in self.peak_rss_mib.items()},
            "peak_rss_mib_total": round(sum(self.peak_rss_mib.values())),
        }


class _Sampler:
    """Samples each component's RSS once a second (peak memory is what the machine must hold)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {}
        for name, pid in pids.items():
            with contextlib.suppress(psutil.NoSuchProcess):
                self.procs[name] = psutil.Process(pid)
        self.peak: dict[str, float] = dict.fromkeys(self.procs, 0.0)
        self.cpu0 = self._cpu()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> dict[str, float]:
        out = {}
        for name, p in self.procs.items():
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                out[name] = t.user + t.system
        return out

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for name, p in self.procs.items():
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.peak[name] = max(self.peak[name], p.memory_info().rss / 2**20)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_delta(self) -> dict[str, float]:
        now = self._cpu()
        return {k: now[k] - self.cpu0.get(k, 0.0) for k in now}


def _wait(predicate: Any, timeout: float, interval: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise DevClusterError(f"timed out after {timeout:.0f}s waiting for {what}")


def run_scale(
    cluster: DevCluster,
    *,
    nodes: int,
    pods: int,
    namespace: str,
    run_seconds: float = 10.0,
    mode: str = "baseline",
    timeout: float = 1800.0,
    log: Any = print,
    scale_down: bool = False,
) -> ScaleResult:
    """Run it; with `scale_down` (autoscale mode) also wait until upstream removed every node."""
    res = ScaleResult(nodes=nodes, pods=pods, mode=mode, run_seconds=run_seconds)
    pids = {p.name: p.pid for p in cluster.state.processes}
    pids["driver"] = psutil.Process().pid
    started = time.monotonic()
    with _Sampler(pids) as sampler, cluster.api() as api:
        _namespace_ready(api, namespace)
        if mode == "baseline":
            cluster.configure_cloud(baseline=nodes)
            wait_for_nodes(api, ROLE_BASELINE, nodes, timeout)
            res.nodes_ready_s = time.monotonic() - started
            log(f"{nodes} baseline nodes Ready after {res.nodes_ready_s:.1f}s")
        else:
            _check_autoscaling(cluster, nodes)

        t_submit = time.monotonic()
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
        _submit_all(api, path, pods, run_seconds)
        res.submit_s = time.monotonic() - t_submit
        log(f"{pods} Jobs submitted in {res.submit_s:.1f}s")

        watch = _Progress(api, res, path, t_submit, log)
        _wait(watch.done, timeout, 3.0, f"{pods} Jobs to succeed")
        res.all_done_s = time.monotonic() - t_submit
        log(f"{pods} Jobs succeeded {res.all_done_s:.1f}s after the first submission")
        if mode == "autoscale":
            res.autoscaled_nodes = int(cluster.cloud_status()["totals"]["stamped"])
            if scale_down:
                t_done = time.monotonic()
                _wait(
                    lambda: not nodes_of(api, ROLE_AUTOSCALED), timeout, 5.0, "every autoscaled node removed"
                )
                res.nodes_removed_s = time.monotonic() - t_done
                log(f"every autoscaled node removed {res.nodes_removed_s:.1f}s after the last Job")
        res.cpu_s = sampler.cpu_delta()
    res.peak_rss_mib = sampler.peak
    res.total_s = time.monotonic() - started
    return res


def _namespace_ready(api: BlockingKubeApi, namespace: str) -> None:
    with contextlib.suppress(Conflict):  # left by an earlier run
        api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
    _wait(
        lambda: api.ok(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        60,
        0.2,
        "service account",
    )


def _check_autoscaling(cluster: DevCluster, nodes: int) -> None:
    settings = cluster.autoscaler_settings
    if settings.baseline or settings.max_nodes < nodes or not cluster.runs_autoscaler:
        raise DevClusterError(
            f"autoscale mode needs a cluster started with the autoscaler, baseline 0 and "
            f"max_nodes >= {nodes} (it has baseline {settings.baseline}, "
            f"max_nodes {settings.max_nodes})"
        )


def _submit_all(api: BlockingKubeApi, path: str, pods: int, run_seconds: float) -> None:
    def submit(i: int) -> None:
        # The client retries 429s under load (after their Retry-After) and 5xx itself;
        # Conflict: a retried create whose first try went through.
        with contextlib.suppress(Conflict):
            api.create(path, gpu_job(f"scale-{i:05d}", run_seconds=run_seconds))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(submit, range(pods)))


class _Progress:
    """The run's progress, looked at every few seconds until every Job has succeeded: how many
    have, the longest a bound pod has waited, and (autoscaling) when the nodes were Ready."""

    def __init__(self, api: BlockingKubeApi, res: ScaleResult, path: str, t_submit: float, log: Any) -> None:
        self._api, self._res, self._path, self._t_submit, self._log = api, res, path, t_submit, log
        self._logged_at = 0.0

    def done(self) -> bool:
        res = self._res
        self._watch_stuck()
        if (
            res.mode == "autoscale"
            and not res.nodes_ready_s
            and self._ready_gpu_nodes() >= min(res.nodes, res.pods)
        ):
            res.nodes_ready_s = time.monotonic() - self._t_submit
            self._log(
                f"{min(res.nodes, res.pods)} autoscaled nodes Ready with a GPU "
                f"{res.nodes_ready_s:.1f}s after the first Job"
            )
        jobs, _ = self._api.list(self._path, {"resourceVersion": "0"}, page_size=5000)
        res.succeeded = sum(1 for j in jobs if (j.get("status") or {}).get("succeeded"))
        if time.monotonic() - self._logged_at > 15:
            self._logged_at = time.monotonic()
            self._log(
                f"  {res.succeeded}/{res.pods} Jobs succeeded ({time.monotonic() - self._t_submit:.0f}s)"
            )
        return res.succeeded >= res.pods

    def _watch_stuck(self) -> None:
        try:
            pending = list_bound_pending(self._api)
        except EopsError:
            return
        res = self._res
        res.longest_bound_pending_s = max([res.longest_bound_pending_s, *(p.seconds for p in pending)])
        stuck = sum(1 for p in pending if p.seconds > GUARD_BOUND_S)
        res.stuck_pods_max = max(res.stuck_pods_max, stuck)

    def _ready_gpu_nodes(self) -> int:
        return sum(
            1
            for n in nodes_of(self._api, ROLE_AUTOSCALED)
            if node_ready(n) and n["status"]["allocatable"].get(GPU_RESOURCE) != "0"
        )
