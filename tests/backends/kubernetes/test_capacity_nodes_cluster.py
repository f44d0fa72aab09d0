"""The capacity page's GPU nodes by state (GET /v1/capacity `nodes`) follow a node's life as
the API server tells it: provisioning (created, not yet Ready with its GPU allocatable), ready
(our pod on it), idle (usable, none of our work), scaling down (the autoscaler's
ToBeDeletedByClusterAutoscaler taint or a deletion under way), then gone.

The truth is read here from the API server's Node and Pod lists, classified by this test's own
reading of the objects (not the gateway's `node_state`), sampled side by side with the
gateway's answer. A node the autoscaler deletes disappears at once in kwok, where a real VM
takes a while to go: the test holds the Node with a finalizer of its own until the gateway has
shown it scaling down, then lets it go.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.domain.errors import NotFound

from .cluster_support import (
    deploy,
    ensure_priority_classes,
    invoke,
    k8s_gateway,
    remove_empty_autoscaled_nodes,
    runs,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("headroom")]

RUN_S = 20
HOLD = "eops.dev/test-hold"
STATES = ("provisioning", "ready", "idle", "scaling_down")
LAG_S = 3.0  # how far behind the API server the gateway's watch may be
HELD_S = 4.0  # a state the API server showed this long must be shown by the gateway


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def truth(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, int]:
    """GPU nodes by state, read from the Node and Pod objects themselves."""
    busy = {
        (p.get("spec") or {}).get("nodeName")
        for p in pods
        if (p.get("status") or {}).get("phase") in ("Pending", "Running")
        and not p["metadata"].get("deletionTimestamp")
    }
    counts = dict.fromkeys(STATES, 0)
    for node in nodes:
        meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
        if not (meta.get("labels") or {}).get(ACCELERATOR_LABEL):
            continue
        taints = {t.get("key") for t in spec.get("taints") or ()}
        if meta.get("deletionTimestamp") or "ToBeDeletedByClusterAutoscaler" in taints:
            counts["scaling_down"] += 1
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
        )
        gpus = int(str((status.get("allocatable") or {}).get(GPU_RESOURCE, "0")))
        if not ready or gpus < 1 or spec.get("unschedulable"):
            counts["provisioning"] += 1
        else:
            counts["ready" if meta["name"] in busy else "idle"] += 1
    return counts


def _shape(counts: dict[str, int]) -> tuple[int, ...]:
    return tuple(counts.get(s, 0) for s in STATES)


class Sampler:
    """Both views every quarter second: (monotonic time, shape) for the API server's and the
    gateway's."""

    def __init__(self, cluster: Any, namespace: str, gw: Any) -> None:
        self.cluster, self.namespace, self.gw = cluster, namespace, gw
        self.api_view: list[tuple[float, tuple[int, ...]]] = []
        self.gw_view: list[tuple[float, tuple[int, ...]]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.cluster.api() as api, httpx.Client(headers=self.gw.auth, timeout=10) as http:
            while not self._stop.is_set():
                try:
                    nodes, _ = api.list("/api/v1/nodes")
                    pods, _ = api.list(f"/api/v1/namespaces/{self.namespace}/pods")
                    self.api_view.append((time.monotonic(), _shape(truth(nodes, pods))))
                    answer = http.get(f"{self.gw.url}/v1/capacity")
                    answer.raise_for_status()
                    self.gw_view.append((time.monotonic(), _shape(answer.json()["nodes"])))
                except Exception as e:  # a sampler that stops would hide why; the test reports it
                    self.errors.append(repr(e))
                self._stop.wait(0.25)

    def seen(self, state: str) -> bool:
        i = STATES.index(state)
        return any(shape[i] for _, shape in self.gw_view)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def spans(view: list[tuple[float, tuple[int, ...]]]) -> list[tuple[tuple[int, ...], float, float]]:
    """The view as runs of one shape: (shape, first seen, last seen)."""
    out: list[tuple[tuple[int, ...], float, float]] = []
    for at, shape in view:
        if out and out[-1][0] == shape:
            out[-1] = (shape, out[-1][1], at)
        else:
            out.append((shape, at, at))
    return out


def _explain(sampler: Sampler, start: float) -> str:
    def rows(view: list[tuple[float, tuple[int, ...]]]) -> str:
        return "\n".join(f"  {a - start:6.1f}-{b - start:6.1f}s {s}" for s, a, b in spans(view))

    return f"{STATES}\napi server:\n{rows(sampler.api_view)}\ngateway:\n{rows(sampler.gw_view)}"


def _hold_new_nodes(cluster: Any, held: set[str], until: float) -> None:
    """Put the test's finalizer on each GPU node that appears, until `until` (monotonic)."""
    with cluster.api() as api:
        while time.monotonic() < until:
            nodes, _ = api.list("/api/v1/nodes", {"labelSelector": ACCELERATOR_LABEL})
            for node in nodes:
                name = node["metadata"]["name"]
                if name not in held:
                    with contextlib.suppress(NotFound):
                        api.patch(f"/api/v1/nodes/{name}", {"metadata": {"finalizers": [HOLD]}})
                        held.add(name)
            time.sleep(0.2)


def _release(cluster: Any, held: set[str]) -> None:
    with cluster.api() as api:
        for name in held:
            with contextlib.suppress(NotFound):
                api.patch(f"/api/v1/nodes/{name}", {"metadata": {"finalizers": None}})


def test_capacity_nodes_follow_a_gpu_nodes_life(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    # A boot and a driver install long enough to be seen on both sides.
    knobs = {"baseline": 0, "provision_delay": "fixed:6", "driver_delay": "fixed:6"}
    held: set[str] = set()
    with cluster.knobs(**knobs), k8s_gateway(cluster, dev_namespace, tmp_path / "gw") as gw:
        cluster.set_baseline(0)  # waits until no baseline node is left
        # No GPU node at all to start with: each count is this one node's.
        deadline = time.monotonic() + 120
        while True:
            remove_empty_autoscaled_nodes(cluster)
            with cluster.api() as api:
                nodes, _ = api.list("/api/v1/nodes", {"labelSelector": ACCELERATOR_LABEL})
            if not nodes:
                break
            assert time.monotonic() < deadline, [n["metadata"]["name"] for n in nodes]
            time.sleep(1.0)
        deploy(gw, name="life", annotations=runs(RUN_S))
        try:
            with Sampler(cluster, dev_namespace, gw) as sampler:
                start = time.monotonic()
                holder = threading.Thread(
                    target=_hold_new_nodes, args=(cluster, held, start + 90), daemon=True
                )
                holder.start()
                inv = invoke(gw, "life")
                wait_state(gw, inv, {"succeeded"}, timeout=180)
                # Empty now; the autoscaler takes it away after its 10 s unneeded time.
                deadline = time.monotonic() + 90
                while not sampler.seen("scaling_down"):
                    assert time.monotonic() < deadline, _explain(sampler, start)
                    time.sleep(0.5)
                time.sleep(HELD_S + 1)
                _release(cluster, held)
                deadline = time.monotonic() + 60
                while not (sampler.gw_view and sampler.gw_view[-1][1] == (0, 0, 0, 0)):
                    assert time.monotonic() < deadline, _explain(sampler, start)
                    time.sleep(0.5)
                time.sleep(1)
                holder.join(timeout=100)
        finally:
            _release(cluster, held)

    report = _explain(sampler, start)
    assert not sampler.errors, f"{sampler.errors[:3]}\n{report}"
    assert len(held) == 1, f"one invocation, one node: {sorted(held)}\n{report}"
    # The node went through every state, as the API server tells it, each for a while.
    api_spans = spans(sampler.api_view)
    for i, state in enumerate(STATES):
        one = tuple(1 if j == i else 0 for j in range(len(STATES)))
        assert any(s == one and b - a >= HELD_S for s, a, b in api_spans), f"{state}\n{report}"
    # What the gateway said for a second or more, the API server said too, within LAG_S
    # (never a state of its own). The two are read one after the other, so the moment between
    # two states (a node usable, its pod not yet bound) may be caught by one read and not the
    # other: a state seen in one sample only is not held against either.
    for shape, first, last in spans(sampler.gw_view):
        if last - first >= 1.0:
            assert any(s == shape and a - LAG_S <= last and first <= b + LAG_S for s, a, b in api_spans), (
                f"{shape} at {first - start:.1f}-{last - start:.1f}s\n{report}"
            )
    # ... and every state the API server held for a while, the gateway showed within LAG_S.
    for shape, a, b in api_spans:
        if b - a >= HELD_S:
            assert any(s == shape and a <= at <= b + LAG_S for at, s in sampler.gw_view), (
                f"{shape} at {a - start:.1f}-{b - start:.1f}s\n{report}"
            )
    assert sampler.gw_view[-1][1] == (0, 0, 0, 0), report
