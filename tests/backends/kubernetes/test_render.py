"""`eops render job` and `eops render deploy`: YAML that kubectl takes (applied for real, with a
server-side dry run, in test_cluster.py), and clear errors for bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticityops.backends.kubernetes.deploy import ROLE_RULES, DeployOptions, build_deploy
from elasticityops.domain.budget import GpuBudget
from helpers.server import EOPS


def _eops(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EOPS, *argv], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def function_file(tmp_path: Path) -> Path:
    path = tmp_path / "fn.yaml"
    path.write_text(
        "name: embed\nimage: worker:1\ncommand: [python, w.py]\npriority: high\ngpu: {count: 2}\n"
        "machine_type: n1-standard-16\n"
    )
    return path


def test_render_job_prints_the_job(function_file: Path) -> None:
    done = _eops(
        "render",
        "job",
        str(function_file),
        "--namespace",
        "gpu",
        "--invocation-id",
        "inv-abc",
        "--kube-gpu-driver-version",
        "latest",
    )
    assert done.returncode == 0, done.stderr
    [job] = list(yaml.safe_load_all(done.stdout))
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "eops-inv-abc"
    assert job["metadata"]["namespace"] == "gpu"
    pod = job["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "eops-high"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert pod["nodeSelector"]["cloud.google.com/gke-gpu-driver-version"] == "latest"
    assert "&id" not in done.stdout  # no YAML anchors


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        pytest.param(
            ["render", "job", "/nonexistent.yaml"], "FUNCTION: /nonexistent.yaml is not a file", id="no-file"
        ),
        pytest.param(["render", "job", "{bad}"], "not a file", id="bad-path"),
        pytest.param(
            ["render", "deploy", "--kube-gpu-driver-version", "newest"],
            "--kube-gpu-driver-version: invalid value 'newest'",
            id="bad-driver",
        ),
    ],
)
def test_bad_input_names_the_field(argv: list[str], words: str) -> None:
    done = _eops(*argv)
    assert done.returncode == 2
    assert words in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_spec_names_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: Bad_Name\ncommand: []\ngpu: {count: 9}\n")
    done = _eops("render", "job", str(path))
    assert done.returncode == 2
    for field in ("name:", "command:", "gpu.count:"):
        assert field in done.stderr


def test_render_deploy_prints_every_object() -> None:
    done = _eops("render", "deploy", "--namespace", "gpu", "--gpu-budget", "40", "--image", "reg/eops:1")
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    kinds = [o["kind"] for o in objects]
    for kind in (
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "PersistentVolumeClaim",
        "Deployment",
        "Service",
    ):
        assert kind in kinds
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["image"] == "reg/eops:1"
    assert env["EOPS_KUBE_NAMESPACE"] == "gpu"
    assert env["EOPS_GPU_BUDGET"] == "40"
    assert "EOPS_KUBE_MAX_GPUS" not in env
    assert env["EOPS_BACKEND"] == "kubernetes"


def test_render_deploy_carries_a_per_type_gpu_budget() -> None:
    budget = GpuBudget(per_type=(("nvidia-tesla-t4", 8), ("nvidia-l4", 2)))
    deployment = next(o for o in build_deploy(DeployOptions(gpu_budget=budget)) if o["kind"] == "Deployment")
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EOPS_GPU_BUDGET"] == "nvidia-tesla-t4=8,nvidia-l4=2"
    done = _eops("render", "deploy", "--gpu-budget", "nvidia-l4=two")
    assert done.returncode == 2
    assert "--gpu-budget: invalid value 'nvidia-l4=two'" in done.stderr + done.stdout


def _rules(kind: str) -> list[dict[str, Any]]:
    return next(o for o in build_deploy(DeployOptions()) if o["kind"] == kind)["rules"]  # type: ignore[no-any-return]


def test_role_is_least_privilege() -> None:
    granted = {
        (g, r, v)
        for rule in _rules("Role")
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("", "secrets", "get") not in granted
    assert ("", "secrets", "list") not in granted
    assert ("batch", "jobs", "update") not in granted
    assert ("", "pods", "delete") not in granted
    assert ("", "pods/log", "get") in granted
    assert ("batch", "jobs", "watch") in granted
    assert all("*" not in rule["verbs"] for rule in ROLE_RULES)


def test_cluster_role_only_reads_nodes() -> None:
    assert _rules("ClusterRole") == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]


def test_priority_classes_protect_running_jobs() -> None:
    classes = {
        o["metadata"]["name"]: o for o in build_deploy(DeployOptions()) if o["kind"] == "PriorityClass"
    }
    assert {classes[n]["value"] for n in ("eops-high", "eops-normal", "eops-low")} == {1000}
    assert classes["eops-placeholder"]["value"] == -10
    assert classes["eops-placeholder"]["preemptionPolicy"] == "Never"
