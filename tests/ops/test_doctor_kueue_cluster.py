"""`eops doctor --admission kueue`, run as a real process against the real Kueue (the `kueue` lane's
cluster): with `eops render kueue` applied and active, every Kueue check passes; with the
LocalQueue gone, the doctor names it and the command that makes it; a ClusterQueue naming an
AdmissionCheck that does not exist is named with Kueue's own reason, and so is the check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elasticityops.ops.kueue import KueueInputs, kueue_manifests
from helpers.doctor import run_doctor
from helpers.kueue import KUEUE, applied, condition, wait_active, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("kueue")]

KUEUE_CHECKS = (
    "kueue-api",
    "kueue-local-queue",
    "kueue-cluster-queue",
    "kueue-admission-checks",
    "kueue-priorities",
    "kueue-access",
)


def kueue_doctor(kubeconfig: Path, namespace: str, *flags: str) -> tuple[int, list[dict[str, str]]]:
    """The doctor with --admission kueue, unless other flags are given."""
    return run_doctor(kubeconfig, namespace, *(flags or ("--admission", "kueue")), timeout=120)


def test_doctor_finds_the_rendered_kueue_healthy_then_names_the_missing_local_queue(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=2",
        namespace=ns,
        cluster_queue=ns,
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    with dev_cluster.api() as api, applied(api, kueue_manifests(inputs)):
        wait_active(api, f"{KUEUE}/admissionchecks/eops-provisioning")
        wait_active(api, f"{KUEUE}/clusterqueues/{ns}")
        # As a gateway that nominates workers runs: the right to write nominations is reviewed too.
        _, findings = kueue_doctor(
            dev_cluster.kubeconfig_path, ns, "--admission", "kueue", "--kube-nominate-wait", "30"
        )
        kueue = [(f["check"], f["status"], f["message"]) for f in findings if f["check"].startswith("kueue")]
        assert [(check, status) for check, status, _ in kueue] == [(c, "pass") for c in KUEUE_CHECKS], kueue
        assert "and patch workloads/status (to nominate workers)" in kueue[-1][2]
        assert f"LocalQueue eops in namespace {ns} submits to ClusterQueue {ns}" in kueue[1][2]
        assert "GPU quota: nvidia-tesla-t4 2" in kueue[2][2]
        assert "eops-provisioning" in kueue[3][2]

        api.delete(f"{KUEUE}/namespaces/{ns}/localqueues/eops")
        code, findings = kueue_doctor(dev_cluster.kubeconfig_path, ns)
        [missing] = [f for f in findings if f["check"] == "kueue-local-queue"]
        assert missing["status"] == "fail"
        assert f"no LocalQueue eops in namespace {ns}" in missing["message"]
        assert f"eops render kueue --namespace {ns} --local-queue eops" in missing["fix"]
        assert code == 1


def test_doctor_names_a_missing_admission_check_with_kueues_reason(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    queue = f"{ns}-broken"
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=1",
        namespace=ns,
        local_queue="broken",
        cluster_queue=queue,
        provisioning_class="none",
    )
    manifests = kueue_manifests(inputs)
    [cluster_queue] = [m for m in manifests if m["kind"] == "ClusterQueue"]
    cluster_queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "no-such-check"}]}
    with dev_cluster.api() as api, applied(api, manifests):

        def inactive() -> dict[str, Any] | None:
            active = condition(api.get(f"{KUEUE}/clusterqueues/{queue}"), "Active")
            return active if active.get("status") == "False" else None

        reason = wait_for(inactive, 60, f"ClusterQueue {queue} inactive")["reason"]
        code, findings = kueue_doctor(dev_cluster.kubeconfig_path, ns, "--kube-local-queue", "broken")
    by_check = {f["check"]: f for f in findings if f["check"].startswith("kueue")}
    assert by_check["kueue-local-queue"]["status"] == "pass"
    cq = by_check["kueue-cluster-queue"]
    assert (cq["status"], reason) == ("fail", "AdmissionCheckNotFound")
    assert f"ClusterQueue {queue} is not active (AdmissionCheckNotFound" in cq["message"]
    assert "--provisioning-class none" in cq["fix"]
    check = by_check["kueue-admission-checks"]
    assert check["status"] == "fail"
    assert (
        f"AdmissionCheck no-such-check, which ClusterQueue {queue} names, does not exist" in check["message"]
    )
    assert code == 1
