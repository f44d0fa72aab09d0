"""Warm capacity on Kubernetes, the pure parts: the placeholder Deployment, the PodTemplate and
CapacityBuffer ask for what the Job asks; the GPU node view; a shape's capacity picture."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, node_state
from elasticityops.backends.kubernetes.labels import PLACEHOLDER_PRIORITY_CLASS
from elasticityops.backends.kubernetes.manifests import build_job
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.warm_objects import (
    BUFFER_STRATEGY,
    buffer_pod_template,
    capacity_buffer,
    placeholder_deployment,
    replicas_of,
    shape_key_of,
    shape_of,
    warm_name,
    warm_selector,
)
from elasticityops.backends.kubernetes.warm_units import KubernetesWarmUnits
from elasticityops.domain.errors import InvalidInput

from .builders import invocation, spec

SETTINGS = KubernetesSettings(namespace="ns", instance="gw1", gpu_driver_version="latest")


def _pod_of_job(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="t4 sized to its machine"),
        pytest.param(
            {"gpu": {"type": "nvidia-l4", "count": 2}, "machine_type": "g2-standard-32"}, id="2x l4"
        ),
        pytest.param({"resources": {"cpu": "2", "memory": "8Gi"}}, id="own requests"),
    ],
)
def test_warm_pods_ask_for_what_the_job_asks_where_the_job_goes(fields: dict[str, Any]) -> None:
    function = spec(**fields)
    job_pod = _pod_of_job(build_job(function, invocation(), SETTINGS))
    shape = shape_of(function, SETTINGS)
    deployment = placeholder_deployment(shape, 3, SETTINGS)
    template = buffer_pod_template(shape, SETTINGS)
    for pod in (deployment["spec"]["template"]["spec"], template["template"]["spec"]):
        assert (
            pod["containers"][0]["resources"]["requests"] == job_pod["containers"][0]["resources"]["requests"]
        )
        assert pod["nodeSelector"] == job_pod["nodeSelector"]
        assert pod["tolerations"] == job_pod["tolerations"]
        assert pod["terminationGracePeriodSeconds"] == 0
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == PLACEHOLDER_PRIORITY_CLASS
    assert "priorityClassName" not in template["template"]["spec"]  # a buffer's pods are virtual
    assert deployment["spec"]["replicas"] == 3


def test_one_name_per_instance_and_shape_found_again_by_label() -> None:
    t4, l4 = shape_of(spec(), SETTINGS), shape_of(spec(gpu={"type": "nvidia-l4"}), SETTINGS)
    other = KubernetesSettings(namespace="ns", instance="gw2")
    names = {warm_name(t4, "gw1"), warm_name(l4, "gw1"), warm_name(t4, "gw2")}
    assert len(names) == 3
    deployment = placeholder_deployment(t4, 2, SETTINGS)
    buffer = capacity_buffer(t4, 2, SETTINGS)
    assert deployment["metadata"]["name"] == buffer["metadata"]["name"] == warm_name(t4, "gw1")
    assert buffer["spec"] == {
        "podTemplateRef": {"name": warm_name(t4, "gw1")},
        "replicas": 2,
        "provisioningStrategy": BUFFER_STRATEGY,
    }
    for obj in (deployment, buffer):
        labels = obj["metadata"]["labels"]
        assert all(labels[k] == v for k, v in (p.split("=") for p in warm_selector("gw1").split(",")))
        assert shape_key_of(obj) == t4.key
        assert replicas_of(obj) == 2
    assert warm_selector("gw1") != warm_selector(other.instance)
    long = warm_name(t4, "x" * 60)
    assert len(long) <= 52
    assert long.endswith(t4.key)


def test_a_spec_the_machine_cannot_hold_has_no_shape() -> None:
    with pytest.raises(InvalidInput):
        shape_of(spec(resources={"cpu": "64", "memory": "1Gi"}), SETTINGS)


def _node(
    name: str,
    *,
    created: float,
    gpus: int = 1,
    ready: bool = True,
    gpu_type: str = "nvidia-tesla-t4",
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": stamp,
            "labels": {"cloud.google.com/gke-accelerator": gpu_type},
        },
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_node_state_reads_usable_gpu_nodes() -> None:
    assert node_state({"metadata": {"name": "cpu"}}, 0) is None
    assert node_state(_node("a", created=0), 5).usable  # type: ignore[union-attr]
    assert not node_state(_node("b", created=0, gpus=0), 5).usable  # type: ignore[union-attr]
    assert not node_state(_node("c", created=0, ready=False), 5).usable  # type: ignore[union-attr]
    going = node_state(_node("d", created=0, taints=[{"key": "ToBeDeletedByClusterAutoscaler"}]), 5)
    assert going is not None
    assert going.going
    assert not going.usable


def test_gpu_nodes_measure_provisioning_only_for_nodes_seen_coming_up() -> None:
    nodes = GpuNodes()
    nodes.on_node("ADDED", _node("old", created=0), now=1000)  # in the first list: up before
    nodes.synced = True
    nodes.on_node("ADDED", _node("new", created=1000, gpus=0), now=1001)
    assert nodes.mean_provisioning_s() is None
    nodes.on_node("MODIFIED", _node("new", created=1000), now=1090)
    assert nodes.mean_provisioning_s() == 90
    assert nodes.nodes["old"].usable_since == 0
    nodes.on_node("DELETED", {"metadata": {"name": "old"}}, now=1100)
    assert set(nodes.nodes) == {"new"}


def test_the_warm_note_says_whether_the_node_was_ready_before_the_pod() -> None:
    nodes = GpuNodes()
    nodes.synced = True
    nodes.on_node("ADDED", _node("warm", created=0), now=10)
    nodes.on_node("ADDED", _node("cold", created=100, gpus=0), now=101)
    nodes.on_node("MODIFIED", _node("cold", created=100), now=160)
    pod_at = datetime.fromtimestamp(50, UTC)
    warm = nodes.warm_note("warm", pod_at)
    cold = nodes.warm_note("cold", pod_at)
    assert warm is not None
    assert warm[0] == "WarmUnits"
    assert "ready 40s before" in warm[1]
    assert cold is not None
    assert cold[0] == "NewNode"
    assert "created 50s after" in cold[1]
    assert nodes.warm_note("unknown", pod_at) is None
    nodes.occupied("warm", "inv-1")
    nodes.vacated("warm", "inv-1", now=70)  # its job ended after the pod was created
    busy = nodes.warm_note("warm", pod_at)
    assert busy is not None
    assert busy[0] == "BusyNode"


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.t, UTC)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.mark.parametrize("mechanism", ["placeholders", "buffer"])
def test_the_picture_counts_free_provisioning_and_idle_nodes(mechanism: str) -> None:
    nodes = GpuNodes()
    for name in ("a", "b", "c"):
        nodes.on_node("ADDED", _node(name, created=0), now=0)
    nodes.on_node("ADDED", _node("l4", created=0, gpu_type="nvidia-l4"), now=0)
    nodes.synced = True
    nodes.on_node("ADDED", _node("booting", created=100, gpus=0), now=100)
    nodes.occupied("a", "inv-1")
    nodes.on_node("ADDED", _node("d", created=50), now=200)  # provisioned in 150 s
    capacity = KubernetesWarmUnits(
        api=None,  # type: ignore[arg-type]
        settings=SETTINGS,
        nodes=nodes,
        clock=_Clock(300.0),
        mechanism=mechanism,
        reaction_s=40.0,
        scale_down_after_s=600.0,
    )
    shape = shape_of(spec(), SETTINGS)
    picture = capacity.picture(shape, units=1)
    assert picture.free_nodes == 3  # b, c, d (a is busy, booting not usable, l4 another type)
    assert picture.provisioning_nodes == 1
    assert picture.lead_time_s == 40.0 + 150.0
    if mechanism == "buffer":
        assert (picture.placeholders_running, picture.placeholders_pending) == (1, 0)
        # Two of the three free nodes can go (the longest empty); the buffer keeps one.
        assert picture.scale_down_in_s == (300.0, 300.0)
    else:
        # No placeholder pod seen yet: the unit waits and every free node can go.
        assert (picture.placeholders_running, picture.placeholders_pending) == (0, 1)
        assert picture.scale_down_in_s == (300.0, 300.0, 500.0)


def test_gpu_nodes_by_state_for_the_console() -> None:
    nodes = GpuNodes()
    nodes.on_node("ADDED", _node("busy", created=0), now=10)
    nodes.on_node("ADDED", _node("idle", created=0), now=10)
    nodes.on_node("ADDED", _node("coming", created=5, gpus=0), now=10)
    nodes.on_node("ADDED", _node("unready", created=5, ready=False), now=10)
    nodes.on_node(
        "ADDED", _node("going", created=0, taints=[{"key": "ToBeDeletedByClusterAutoscaler"}]), now=10
    )
    nodes.occupied("busy", "inv-1")
    assert nodes.by_state() == {"provisioning": 2, "ready": 1, "idle": 1, "scaling_down": 1}
    nodes.vacated("busy", "inv-1", now=20)
    assert nodes.by_state() == {"provisioning": 2, "ready": 0, "idle": 2, "scaling_down": 1}
