"""Pods bound to a Ready kwok-managed node that never started: find them, never re-kick them.

kwok 0.8.0 sometimes leaves a pod bound to a Ready node it manages in phase Pending for
minutes (issue 14; docs/dev-cluster.md, "Simulated nodes"). Until the cause is gone the dev
cluster watches for it: `eops dev-cluster status` lists such pods and the pytest plugin fails
a test that leaves one. Nothing here touches a pod: patching it would replay kwok's stages and
hide the fault. (`replayable` is the exception by design: after an etcd outage the dev cluster
replays the pods kwok may have dropped a stage of, as a kubelet retries; DevCluster.replay_pods.)

`bound_pending` is pure (listed pods and nodes in, a list out); `list_bound_pending` lists
through the dev cluster's `BlockingKubeApi`; `settle` polls until each bound-but-Pending pod
either starts or passes the bound.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.devcluster.nodes import KWOK_NODE_ANNOTATION, node_ready
from elasticityops.domain.simulated_run import RUN_SECONDS

KWOK_MANAGED_VALUE = "fake"
"""The annotation value kwok is configured to manage (stages.kwok_configuration)."""
PAGE = 1000
GUARD_BOUND_S = 60.0
"""Seconds bound-but-Pending the suite's guard and the scale bench count as stuck (the pytest
plugin's EOPS_DEV_CLUSTER_STUCK_AFTER default); `eops dev-cluster status` looks closer (30 s)."""


@dataclass(frozen=True)
class StuckPod:
    """A pod bound to a Ready kwok-managed node whose containers have not started.

    `seconds`: since the later of its binding and its node turning Ready (a pod bound to a
    node before kwok readied it has had no chance to start before then)."""

    namespace: str
    name: str
    node: str
    seconds: float

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "node": self.node, "seconds": self.seconds}

    def __str__(self) -> str:
        return f"{self.key} on {self.node}: bound and Pending {self.seconds:.0f}s"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def kwok_managed(node: dict[str, Any]) -> bool:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(KWOK_NODE_ANNOTATION) == KWOK_MANAGED_VALUE


def _started(pod: dict[str, Any]) -> bool:
    """Some container (or init container) has run: kwok played at least its first stage."""
    status = pod.get("status") or {}
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        if cs.get("started") or "running" in state or "terminated" in state:
            return True
    return False


def bound_time(pod: dict[str, Any]) -> float | None:
    """When the pod was bound: PodScheduled=True's transition; a pod created with spec.nodeName
    (no scheduler, no such condition) counts from its creation."""
    cond = _condition(pod, "PodScheduled")
    if cond is not None and cond.get("status") == "True":
        at = epoch(cond.get("lastTransitionTime"))
        if at is not None:
            return at
    return epoch((pod.get("metadata") or {}).get("creationTimestamp"))


def bound_pending(
    pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]], now: float
) -> list[StuckPod]:
    """Every pod bound to a Ready kwok-managed node, still Pending with no container started
    and not being deleted, with the seconds since max(bound time, node Ready time); sorted
    longest first. Pods on other nodes (unmanaged, NotReady, unknown) are not kwok's to start."""
    ready_since: dict[str, float] = {}
    for node in nodes:
        if not (kwok_managed(node) and node_ready(node)):
            continue
        cond = _condition(node, "Ready") or {}
        ready_since[node["metadata"]["name"]] = epoch(cond.get("lastTransitionTime")) or 0.0
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if (
            node_name not in ready_since
            or meta.get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase", "Pending") != "Pending"
            or _started(pod)
        ):
            continue
        bound = bound_time(pod)
        if bound is None:
            continue
        since = max(bound, ready_since[node_name])
        found.append(StuckPod(meta.get("namespace", ""), meta["name"], node_name, max(now - since, 0.0)))
    return sorted(found, key=lambda p: (-p.seconds, p.key))


def stuck_pods(
    pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]], now: float, bound_seconds: float
) -> list[StuckPod]:
    """The pods of `bound_pending` that have waited longer than `bound_seconds`."""
    return [p for p in bound_pending(pods, nodes, now) if p.seconds > bound_seconds]


def list_bound_pending(api: Any, now: Callable[[], float] = time.time) -> list[StuckPod]:
    """`bound_pending` over the cluster: one paged list of Pending pods; the nodes are listed
    only when one of those pods is bound (the common, nothing-stuck case costs one call)."""
    pods, _ = api.list("/api/v1/pods", {"fieldSelector": "status.phase=Pending"}, PAGE)
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if not bound:
        return []
    nodes, _ = api.list("/api/v1/nodes", page_size=PAGE)
    return bound_pending(bound, nodes, now())


def settle(
    listing: Callable[[], list[StuckPod]],
    bound_seconds: float,
    cap_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    interval: float = 0.5,
) -> list[StuckPod]:
    """The pods still bound-but-Pending past `bound_seconds`, after giving each pod bound-but-
    Pending at the first listing until its own bound (so a pod bound a moment ago is not called
    stuck). Polls until every one of them has started (left the listing) or passed the bound,
    at most `cap_seconds`; pods that appear meanwhile are not waited for. Returns [] at once
    when nothing is bound-but-Pending (one `listing` call)."""
    first = listing()
    if not first:
        return []
    watched = {p.key for p in first}
    deadline = clock() + cap_seconds
    current = first
    while True:
        current = [p for p in current if p.key in watched]
        if all(p.seconds > bound_seconds for p in current) or clock() >= deadline:
            return [p for p in current if p.seconds > bound_seconds]
        sleep(interval)
        current = listing()


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kwok_gates_pods_on_its_lease_cache(
    api: Any, namespace: str, kwok_leases: bool = False, wait: float = 3.0
) -> bool:
    """Whether this kwok process skips pods on nodes whose Lease its cache says it does not hold.

    kwok 0.8.0 with node Leases copies `readOnlyFunc` (`!nodeLeases.Held(node)`, read from its
    lease informer's cache) into the pod controller when it creates it, and creates the pod and
    node controllers in the iteration order of a Go map (controller.go, `range
    c.conf.LocalStages`): only when the node controller came first is the pod path gated, which
    is the path that can skip a pod silently for good (see docs/dev-cluster.md). Without Leases
    (the dev cluster's default, `kwok_leases` False) there is no such function and no gate.

    A probe: a throwaway kwok node whose Lease is held by another holder (kwok's own one handed
    over when `kwok_leases`, else one the probe creates; renewed for 10 min, so the node would
    stay Ready), a pod bound to it; gated when the pod is still Pending after `wait` seconds.
    Removes the node, the pod and a Lease it created afterwards."""
    from elasticityops.devcluster.nodes import ZONES, gpu_node

    name = f"gke-eops-gate-probe-{int(time.time() * 1000) % 10**8}"
    node = gpu_node(name, pool="gate-probe", zone=ZONES[0], role="gate-probe", now=_micro_now()[:19] + "Z")
    api.create("/api/v1/nodes", node)
    pod_path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    foreign = {"holderIdentity": "eops-gate-probe", "renewTime": _micro_now(), "leaseDurationSeconds": 600}
    kwok_id = ""
    try:
        if kwok_leases:
            deadline = time.monotonic() + 30
            while True:
                try:
                    kwok_id = api.get(f"{LEASES}/{name}")["spec"]["holderIdentity"]
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            api.patch(f"{LEASES}/{name}", {"spec": foreign})
        else:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}}
            api.create(LEASES, {**lease, "spec": foreign})
        time.sleep(1.0)  # for kwok's lease informer
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": {RUN_SECONDS: "3600"}},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
        api.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        time.sleep(wait)
        return bool(api.get(pod_path)["status"].get("phase") == "Pending")
    finally:
        # The Lease back first, so that a gated kwok plays the pod's deletion (no kubelet would).
        with contextlib.suppress(Exception):
            if kwok_id:
                api.patch(
                    f"{LEASES}/{name}", {"spec": {"holderIdentity": kwok_id, "renewTime": _micro_now()}}
                )
            elif not kwok_leases:
                api.delete(f"{LEASES}/{name}")
            api.delete(pod_path)
            # Gone before its node: kwok plays a pod's deletion only on a node it manages.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and api.ok(pod_path):
                time.sleep(0.2)
        api.delete(f"/api/v1/nodes/{name}")


REPLAYED_ANNOTATION = "eops.dev/replayed-at"
"""Set on the pods `DevCluster.replay_pods` touches: the change is what makes kwok play them."""


def replayable(pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) of the pods whose next stage kwok may have dropped: bound to a
    kwok-managed node, Pending or Running, not being deleted. Pure."""
    managed = {str((n.get("metadata") or {}).get("name")) for n in nodes if kwok_managed(n)}
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName") not in managed:
            continue
        if (pod.get("status") or {}).get("phase") in ("Pending", "Running"):
            found.append((str(meta.get("namespace")), str(meta.get("name"))))
    return found
