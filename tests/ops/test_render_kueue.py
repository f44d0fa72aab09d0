"""`eops render kueue` (ops/kueue.py): the quota per GPU type as flavors of one ClusterQueue, the
priority levels as WorkloadPriorityClasses, the ProvisioningRequest check, and clear refusals."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from elasticityops.cli.main import app
from elasticityops.domain.errors import InvalidInput
from elasticityops.ops.kueue import KueueInputs, kueue_manifests, render_kueue


def _by_kind(inputs: KueueInputs) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for manifest in kueue_manifests(inputs):
        out.setdefault(manifest["kind"], []).append(manifest)
    return out


def test_the_budget_per_type_is_the_quota_of_one_flavor_each() -> None:
    objects = _by_kind(KueueInputs(gpu_budget="nvidia-tesla-t4=8,nvidia-l4=2", namespace="gpu"))
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in objects["ResourceFlavor"]}
    assert flavors == {
        "nvidia-l4": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "nvidia-tesla-t4": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
    }
    [queue] = objects["ClusterQueue"]
    [group] = queue["spec"]["resourceGroups"]
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quota["nvidia-tesla-t4"] == {"nvidia.com/gpu": 8, "cpu": 32, "memory": "120Gi"}, "n1-standard-4 x8"
    assert quota["nvidia-l4"]["nvidia.com/gpu"] == 2
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "gpu"}}
    assert queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    [local] = objects["LocalQueue"]
    assert local["metadata"] == {"name": "eops", "namespace": "gpu"}
    assert local["spec"] == {"clusterQueue": "eops"}


def test_priority_levels_become_workload_priority_classes_in_admission_order() -> None:
    classes = _by_kind(KueueInputs(gpu_budget="nvidia-tesla-t4=1"))["WorkloadPriorityClass"]
    values = {c["metadata"]["name"]: c["value"] for c in classes}
    assert values["eops-high"] > values["eops-normal"] > values["eops-low"] > 0


def test_capacity_waits_on_a_provisioning_request_unless_none() -> None:
    dws = _by_kind(KueueInputs(gpu_budget="nvidia-tesla-t4=1"))
    [config] = dws["ProvisioningRequestConfig"]
    assert config["spec"]["provisioningClassName"] == "queued-provisioning.gke.io", "GKE's DWS by default"
    [check] = dws["AdmissionCheck"]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    [queue] = dws["ClusterQueue"]
    assert queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": check["metadata"]["name"]}]
    }
    plain = _by_kind(KueueInputs(gpu_budget="nvidia-tesla-t4=1", provisioning_class="none"))
    assert "AdmissionCheck" not in plain
    assert "ProvisioningRequestConfig" not in plain
    assert "admissionChecksStrategy" not in plain["ClusterQueue"][0]["spec"]


def test_every_object_comes_before_what_names_it() -> None:
    kinds = [m["kind"] for m in kueue_manifests(KueueInputs(gpu_budget="nvidia-tesla-t4=1"))]
    assert kinds.index("ResourceFlavor") < kinds.index("ClusterQueue") < kinds.index("LocalQueue")
    assert (
        kinds.index("ProvisioningRequestConfig") < kinds.index("AdmissionCheck") < kinds.index("ClusterQueue")
    )


@pytest.mark.parametrize(
    ("given", "field", "says"),
    [
        ({"gpu_budget": "8"}, "gpu-budget", "per flavor"),
        ({"gpu_budget": "t4=1"}, "gpu-budget", "unknown GPU type"),
        ({"gpu_budget": "nvidia-tesla-t4=1", "local_queue": "Team A"}, "local-queue", "DNS label"),
        ({"gpu_budget": "nvidia-tesla-t4=1", "provisioning_class": "fast"}, "provisioning-class", "none"),
    ],
    ids=["bare-number", "unknown-type", "bad-queue-name", "unknown-class"],
)
def test_bad_inputs_are_refused_naming_the_flag(given: dict[str, str], field: str, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        kueue_manifests(KueueInputs(**given))
    [problem] = caught.value.problems
    assert problem.field == field
    assert says in problem.problem + problem.fix


def test_the_command_prints_one_yaml_stream_for_kubectl_apply() -> None:
    result = CliRunner().invoke(app, ["render", "kueue", "--gpu-budget", "nvidia-tesla-t4=2"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs][-2:] == ["ClusterQueue", "LocalQueue"]
    assert result.stdout.rstrip("\n") == render_kueue(KueueInputs(gpu_budget="nvidia-tesla-t4=2"))[
        "kueue.yaml"
    ].rstrip("\n")
    refused = CliRunner().invoke(app, ["render", "kueue", "--gpu-budget", "4"])
    assert refused.exit_code == 2
    assert "--gpu-budget" in refused.output
    assert "nvidia-tesla-t4=8" in refused.output
