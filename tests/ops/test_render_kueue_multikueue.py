"""`eops render kueue --multikueue` (ops/kueue_multikueue.py): the manager's objects, each before
what names it, the workers' kubeconfigs as Kueue takes them, and the CLI's refusals. The set of
dev clusters applies the same objects to the real Kueue (tests/devcluster/test_multikueue_cluster.py)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.runner import Eops
from elasticityops.devcluster.certs import generate_pki, write_kubeconfig
from elasticityops.ops import kueue_multikueue as multikueue
from elasticityops.ops.kueue import NO_PROVISIONING, KueueInputs, kueue_manifests
from elasticityops.ops.kueue_multikueue import manager_objects


def _queue_objects() -> list[dict[str, Any]]:
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=4", namespace="default", provisioning_class=NO_PROVISIONING
    )
    return kueue_manifests(inputs)


def _kubeconfig(tmp_path: Path, name: str) -> str:
    pki = generate_pki(tmp_path / name)
    path = tmp_path / f"{name}.kubeconfig"
    write_kubeconfig(path, "https://127.0.0.1:6443", pki)
    return path.read_text()


def test_each_worker_kubeconfig_is_a_secret_in_kueues_namespace(tmp_path: Path) -> None:
    text = _kubeconfig(tmp_path, "w1")
    secret = multikueue.kubeconfig_secret("worker-1", text)
    assert secret["metadata"] == {"name": "multikueue-worker-1", "namespace": "kueue-system"}
    # The key MultiKueue reads (kueue.MultiKueueConfigSecretKey), the kubeconfig as written.
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == text


def test_a_kubeconfig_that_points_at_files_is_refused_as_kueue_would(tmp_path: Path) -> None:
    doc = yaml.safe_load(_kubeconfig(tmp_path, "w1"))
    doc["clusters"][0]["cluster"] = {"server": "https://127.0.0.1:1", "certificate-authority": "/ca.crt"}
    with pytest.raises(ValueError, match="certificate-authority-data"):
        multikueue.kubeconfig_secret("worker-1", yaml.safe_dump(doc))
    doc = yaml.safe_load(_kubeconfig(tmp_path, "w2"))
    doc["users"][0]["user"] = {"tokenFile": "/token"}
    with pytest.raises(ValueError, match="no file paths"):
        multikueue.kubeconfig_secret("worker-2", yaml.safe_dump(doc))


def test_the_manager_dispatches_its_queue_through_multikueue(tmp_path: Path) -> None:
    configs = {"worker-1": _kubeconfig(tmp_path, "w1"), "worker-2": _kubeconfig(tmp_path, "w2")}
    objects = manager_objects(_queue_objects(), configs)
    kinds = [o["kind"] for o in objects]
    # Each before what names it: Secrets, clusters, their config, the check, then the queues.
    assert kinds[:6] == [
        "Secret",
        "Secret",
        "MultiKueueCluster",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "AdmissionCheck",
    ]
    clusters = [o for o in objects if o["kind"] == "MultiKueueCluster"]
    assert [c["spec"]["clusterSource"]["kubeConfig"] for c in clusters] == [
        {"location": "multikueue-worker-1", "locationType": "Secret"},
        {"location": "multikueue-worker-2", "locationType": "Secret"},
    ]
    [config] = [o for o in objects if o["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == ["worker-1", "worker-2"]
    [check] = [o for o in objects if o["kind"] == "AdmissionCheck"]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    [queue] = [o for o in objects if o["kind"] == "ClusterQueue"]
    assert queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": check["metadata"]["name"]}]
    }
    [local] = [o for o in objects if o["kind"] == "LocalQueue"]
    assert local["metadata"] == {"name": "eops", "namespace": "default"}


def test_the_workers_queue_objects_are_left_as_rendered(tmp_path: Path) -> None:
    rendered = _queue_objects()
    manager_objects(rendered, {"worker-1": _kubeconfig(tmp_path, "w1")})
    [queue] = [o for o in rendered if o["kind"] == "ClusterQueue"]
    assert "admissionChecksStrategy" not in queue["spec"], "the workers' copy gets no MultiKueue check"


def test_a_manager_needs_workers_and_a_cluster_queue(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        manager_objects(_queue_objects(), {})
    without_queue = [o for o in _queue_objects() if o["kind"] != "ClusterQueue"]
    with pytest.raises(ValueError, match="no ClusterQueue"):
        manager_objects(without_queue, {"worker-1": _kubeconfig(tmp_path, "w1")})


def test_the_command_renders_the_managers_objects_from_the_workers_kubeconfigs(tmp_path: Path) -> None:
    w1, w2 = tmp_path / "w1.kubeconfig", tmp_path / "w2.kubeconfig"
    w1.write_text(_kubeconfig(tmp_path, "w1"))
    w2.write_text(_kubeconfig(tmp_path, "w2"))
    result = Eops(None)(
        "render", "kueue", "--gpu-budget", "nvidia-tesla-t4=8", "--namespace", "team-a",
        "--multikueue", f"worker-1={w1},worker-2={w2}",
    )  # fmt: skip
    assert result.code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds[:6] == [
        "Secret",
        "Secret",
        "MultiKueueCluster",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "AdmissionCheck",
    ]
    assert "ProvisioningRequestConfig" not in kinds, "capacity checks are the workers'"
    [secret, _] = [d for d in docs if d["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == w1.read_text()
    [queue] = [d for d in docs if d["kind"] == "ClusterQueue"]
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "eops-multikueue"}]}
    [local] = [d for d in docs if d["kind"] == "LocalQueue"]
    assert local["metadata"] == {"name": "eops", "namespace": "team-a"}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        pytest.param(["--multikueue", "worker-1"], "is not NAME=KUBECONFIG", id="no-kubeconfig"),
        pytest.param(["--multikueue", "worker-1=/nonexistent/k"], "cannot be read", id="missing-file"),
        pytest.param(["--multikueue", "Worker=/etc/hostname"], "not a MultiKueueCluster name", id="bad-name"),
        pytest.param(["--multikueue", "worker-1=FILE"], "embed the CA", id="file-paths"),
        pytest.param(
            ["--multikueue", "worker-1=GOOD", "--provisioning-class", "check-capacity.autoscaling.x-k8s.io"],
            "belongs on the workers",
            id="capacity-check-on-the-manager",
        ),
    ],
)
def test_what_the_manager_cannot_be_rendered_from_is_refused_naming_the_flag(
    tmp_path: Path, extra: list[str], says: str
) -> None:
    good = tmp_path / "good.kubeconfig"
    good.write_text(_kubeconfig(tmp_path, "w1"))
    with_files = yaml.safe_load(good.read_text())
    with_files["clusters"][0]["cluster"] = {
        "server": "https://127.0.0.1:1",
        "certificate-authority": "/ca.crt",
    }
    files = tmp_path / "files.kubeconfig"
    files.write_text(yaml.safe_dump(with_files))
    args = [a.replace("=GOOD", f"={good}").replace("=FILE", f"={files}") for a in extra]
    result = Eops(None)("render", "kueue", "--gpu-budget", "nvidia-tesla-t4=8", *args)
    assert result.code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output
