"""`eops dev-cluster up` installs the PriorityClasses; `eops serve --backend kubernetes` refuses to
start without them, naming the fix, instead of failing every invocation as launch_error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.labels import PRIORITY_CLASSES
from elasticityops.backends.kubernetes.preflight import (
    PRIORITY_CLASS_PATH,
    budget_types_problem,
    gpu_types_of_templates,
    missing_message,
    missing_priority_classes,
    namespace_message,
)
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import NotFound, TemporaryError

from .cluster_support import start_k8s_gateway


class _Api:
    def __init__(self, present: set[str], error: Exception | None = None) -> None:
        self.present, self.error = present, error
        self.asked: list[str] = []

    async def get(self, path: str) -> dict[str, Any]:
        self.asked.append(path)
        if self.error is not None:
            raise self.error
        name = path.rsplit("/", 1)[1]
        if name not in self.present:
            raise NotFound(f"{path}: 404")
        return {"metadata": {"name": name}}


def test_only_a_404_counts_as_missing() -> None:
    api = _Api({"eops-high", "eops-low"})
    assert asyncio.run(missing_priority_classes(api)) == ["eops-normal"]  # type: ignore[arg-type]
    assert api.asked == [f"{PRIORITY_CLASS_PATH}/{n}" for n in PRIORITY_CLASSES.values()]
    # Unreachable or forbidden says nothing about whether they exist: the caller decides.
    with pytest.raises(TemporaryError):
        asyncio.run(missing_priority_classes(_Api(set(), TemporaryError("down"))))  # type: ignore[arg-type]


def test_the_message_names_the_commands_that_fix_it() -> None:
    text = missing_message(["eops-normal"])
    assert "eops-normal" in text
    assert "eops dev-cluster up" in text
    assert "eops render gke" in text


@pytest.mark.cluster
def test_dev_cluster_up_installs_them(dev_cluster: Any) -> None:
    with dev_cluster.api() as api:
        for pc in priority_classes():
            got = api.get(f"{PRIORITY_CLASS_PATH}/{pc['metadata']['name']}")
            assert got["value"] == pc["value"]


def test_the_namespace_message_names_how_to_make_it() -> None:
    text = namespace_message("team-a")
    assert "no namespace 'team-a'" in text
    assert "kubectl create namespace team-a" in text
    assert "--namespace" in text


@pytest.mark.cluster
def test_dev_cluster_up_makes_the_gateways_default_namespace(dev_cluster: Any) -> None:
    # The README's tour runs `eops serve --backend kubernetes` on a fresh `up` with no other step.
    with dev_cluster.api() as api:
        got = api.get(f"/api/v1/namespaces/{KubernetesSettings().namespace}")
    assert got["metadata"]["name"] == "elasticityops"


@pytest.mark.cluster
def test_serve_exits_naming_the_fix_when_its_namespace_is_missing(dev_cluster: Any, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        start_k8s_gateway(dev_cluster, "no-such-namespace", tmp_path / "gw").stop()
    assert "no namespace 'no-such-namespace'" in str(failed.value)
    assert "kubectl create namespace no-such-namespace" in str(failed.value)


def test_the_dev_clusters_node_groups_offer_t4_and_l4() -> None:
    from elasticityops.devcluster.kwok_provider import configmaps

    templates = next(
        c for c in configmaps("kube-system", 10) if c["metadata"]["name"] == "kwok-provider-templates"
    )
    assert gpu_types_of_templates(templates["data"]["templates"]) == {"nvidia-tesla-t4", "nvidia-l4"}
    assert gpu_types_of_templates("") == set()


def test_a_budget_for_a_type_no_node_group_offers_is_named_with_what_is_offered() -> None:
    offered = {"nvidia-tesla-t4", "nvidia-l4"}
    assert budget_types_problem({"nvidia-l4"}, offered) is None
    said = budget_types_problem({"nvidia-h100-80gb", "nvidia-l4"}, offered)
    assert said is not None
    assert said.startswith("--gpu-budget names nvidia-h100-80gb, for which the cluster has no node group")
    assert "nvidia-l4, nvidia-tesla-t4" in said


@pytest.mark.cluster
def test_serve_refuses_a_budget_for_a_type_the_cluster_cannot_add(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    env = {"EOPS_GPU_BUDGET": "nvidia-tesla-t4=4,nvidia-h100-80gb=2"}
    with pytest.raises(RuntimeError, match="exited with 2") as failed:
        start_k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw", env=env).stop()
    assert "--gpu-budget names nvidia-h100-80gb" in str(failed.value)


def test_capacity_buffers_are_served_only_where_discovery_lists_them() -> None:
    from elasticityops.backends.kubernetes.preflight import BUFFERS_MESSAGE
    from elasticityops.backends.kubernetes.warm_units import buffers_served

    class _Discovery:
        def __init__(self, doc: dict[str, Any] | None) -> None:
            self.doc = doc

        async def get(self, path: str) -> dict[str, Any]:
            assert path == "/apis/autoscaling.x-k8s.io/v1beta1"
            if self.doc is None:
                raise NotFound(f"{path}: 404")
            return self.doc

    served = {"resources": [{"name": "capacitybuffers"}, {"name": "capacitybuffers/status"}]}
    assert asyncio.run(buffers_served(_Discovery(served))) is True  # type: ignore[arg-type]
    assert asyncio.run(buffers_served(_Discovery({"resources": [{"name": "other"}]}))) is False  # type: ignore[arg-type]
    assert asyncio.run(buffers_served(_Discovery(None))) is False  # type: ignore[arg-type]
    assert "--headroom-mechanism placeholders" in BUFFERS_MESSAGE
