"""Against the real dev cluster (kube-apiserver v1.36 + kwok T4 nodes):

- every rendered Kubernetes manifest passes a server-side dry run (ComputeClass through a
  minimal CRD of the fields the render writes, see data/computeclass-crd.yaml), and the server
  rejects a broken variant, so the validation can fail;
- `eops doctor`, run as a real process, passes on the healthy set-up (what `eops render` produces,
  applied) and names each fault and its fix when the cluster is broken on purpose, one fault at
  a time.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from elasticityops.backends.kubernetes.deploy import NODE_RULES, ROLE_RULES
from elasticityops.devcluster.nodes import ROLE_LABEL, ZONES, gpu_node
from elasticityops.ops.elasticity.inputs import ElasticityInputs
from elasticityops.ops.elasticity.render import render_elasticity
from elasticityops.ops.gke.inputs import GkeInputs
from elasticityops.ops.gke.render import render_gke
from helpers.doctor import run_doctor

from .manifests import load_documents

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("faults")]

HERE = Path(__file__).parent
GKE = GkeInputs(project="eops-dev-1", region="us-central1", zones=ZONES, peak=4000, baseline=60, spot=True)
GPU_LABEL = ("cloud.google.com/gke-accelerator", None)  # what the kwok T4 nodes carry
T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], what: str, timeout: float = 90.0) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def kubectl(cluster: Any, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = cluster.kubectl(*args, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
    return done


def named(findings: list[dict[str, str]], check: str, status: str, text: str) -> dict[str, str]:
    for finding in findings:
        if finding["check"] == check and finding["status"] == status and text in finding["message"]:
            return finding
    seen = [(f["check"], f["status"], f["message"]) for f in findings]
    raise AssertionError(f"no {status} {check} finding mentioning {text!r}; got {seen}")


def failures(findings: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(f["check"], f["message"]) for f in findings if f["status"] == "fail"]


def _daemonset_ready(cluster: Any, namespace: str, name: str) -> bool:
    with cluster.api() as api:
        status = api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}").get("status", {})
    desired = int(status.get("desiredNumberScheduled") or 0)
    return desired > 0 and int(status.get("numberReady") or 0) == desired


@pytest.fixture(scope="module")
def healthy(dev_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The healthy set-up: what `eops render gke` and `eops render elasticity` produce, applied."""
    out = tmp_path_factory.mktemp("ops-render")
    gke_dir = write(out / "gke", render_gke(GKE).files)
    rendered = render_elasticity(ElasticityInputs(deployment="svc", gpu_node_label=GPU_LABEL))
    elastic_dir = write(out / "elasticity", rendered.files)
    kubectl(dev_cluster, "apply", "-f", str(gke_dir / "priorityclasses.yaml"))
    kubectl(dev_cluster, "apply", "-f", str(elastic_dir / "device-plugin.yaml"))
    wait_for(
        lambda: _daemonset_ready(dev_cluster, "kube-system", "nvidia-device-plugin-daemonset"),
        "the rendered device plugin DaemonSet to be ready on every GPU node",
    )
    try:
        yield dev_cluster
    finally:
        kubectl(dev_cluster, "delete", "--ignore-not-found", "-f", str(elastic_dir / "device-plugin.yaml"))


# --- server-side dry run of every rendered manifest -------------------------------------------


@pytest.fixture
def computeclass_crd(dev_cluster: Any) -> Iterator[None]:
    crd = HERE / "data" / "computeclass-crd.yaml"
    kubectl(dev_cluster, "apply", "-f", str(crd))
    kubectl(
        dev_cluster,
        "wait",
        "--for=condition=Established",
        "crd/computeclasses.cloud.google.com",
        "--timeout=60s",
    )
    try:
        yield
    finally:
        kubectl(dev_cluster, "delete", "--ignore-not-found", "-f", str(crd))


def test_gke_manifests_pass_server_dry_run(dev_cluster: Any, computeclass_crd: None, tmp_path: Path) -> None:
    for inputs in (GKE, replace(GKE, spot=False, fallback_gpu_type=None, preload_disk_image="eops-images-1")):
        directory = write(tmp_path / f"spot-{inputs.spot}", render_gke(inputs).files)
        for name in ("priorityclasses.yaml", "computeclass.yaml"):
            done = kubectl(dev_cluster, "apply", "--dry-run=server", "-f", str(directory / name))
            assert "(server dry run)" in done.stdout
    # The validation can fail: the server refuses a value GKE does not accept.
    broken = load_documents(render_gke(GKE).files["computeclass.yaml"])[0]
    broken["spec"]["whenUnsatisfiable"] = "Sometimes"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(broken))
    done = kubectl(dev_cluster, "apply", "--dry-run=server", "-f", str(tmp_path / "broken.yaml"), check=False)
    assert done.returncode != 0
    assert "whenUnsatisfiable" in done.stderr


def test_elasticity_manifests_pass_server_dry_run(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ns = dev_namespace
    inputs = ElasticityInputs(
        deployment="svc", namespace=ns, monitoring_namespace=ns, gpu_node_label=GPU_LABEL
    )
    rendered = render_elasticity(inputs)
    directory = write(tmp_path, rendered.files)
    for name in ("device-plugin.yaml", "dcgm-exporter.yaml", "hpa.yaml"):
        done = kubectl(dev_cluster, "apply", "--dry-run=server", "-f", str(directory / name))
        assert done.stdout.count("(server dry run)") == len(load_documents(rendered.files[name]))
    # The Helm values carry the same affinity and tolerations as the validated DaemonSet.
    pod_spec = rendered.manifests[0]["spec"]["template"]["spec"]
    assert rendered.device_plugin_values["affinity"] == pod_spec["affinity"]
    assert rendered.device_plugin_values["tolerations"] == pod_spec["tolerations"]
    # The grace-period patch applies to a real Deployment.
    kubectl(dev_cluster, "-n", ns, "create", "deployment", "svc", "--image=registry.k8s.io/pause:3.10")
    done = kubectl(
        dev_cluster, "-n", ns, "patch", "deployment", "svc", "--dry-run=server",
        "--patch-file", str(directory / "deployment-patch.yaml"), "-o", "json",
    )  # fmt: skip
    assert json.loads(done.stdout)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120
    # And the server rejects an HPA that cannot work (scale to zero is behind a feature gate).
    hpa = copy.deepcopy(next(m for m in rendered.manifests if m["kind"] == "HorizontalPodAutoscaler"))
    hpa["spec"]["minReplicas"] = 0
    (tmp_path / "broken-hpa.yaml").write_text(yaml.safe_dump(hpa))
    done = kubectl(
        dev_cluster, "apply", "--dry-run=server", "-f", str(tmp_path / "broken-hpa.yaml"), check=False
    )
    assert done.returncode != 0
    assert "minReplicas" in done.stderr


# --- doctor: healthy, then one fault at a time ------------------------------------------------


def test_doctor_passes_on_the_healthy_cluster(healthy: Any, dev_namespace: str) -> None:
    # Nodes that earlier tests' autoscaling added need their plugin pod ready first.
    wait_for(
        lambda: _daemonset_ready(healthy, "kube-system", "nvidia-device-plugin-daemonset"),
        "the device plugin to be ready on every GPU node",
    )
    code, findings = run_doctor(healthy.kubeconfig_path, dev_namespace)
    assert failures(findings) == []
    assert code == 0
    assert [f for f in findings if f["status"] == "warn"] == []
    for check in (
        "api",
        "permissions",
        "gpu-nodes",
        "gpu-allocatable",
        "device-plugin",
        "priority-classes",
        "pending-pods",
    ):
        assert any(f["check"] == check and f["status"] == "pass" for f in findings), check


def test_doctor_names_a_gpu_node_without_allocatable_gpus(healthy: Any, dev_namespace: str) -> None:
    name = f"doctor-nogpu-{secrets.token_hex(3)}"
    # Ready for 20 min without a GPU: past doctor's grace for a driver still installing.
    since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=20)
    node = gpu_node(
        name, pool="doctor-broken", zone=ZONES[0], role="doctor", now=since.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    del node["metadata"]["labels"][
        ROLE_LABEL
    ]  # neither baseline nor autoscaled: the simulated cloud leaves it alone
    for key in ("capacity", "allocatable"):
        node["status"][key].pop("nvidia.com/gpu")
    with healthy.api() as api:
        api.create("/api/v1/nodes", node)
        try:
            wait_for(
                lambda: any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in api.get(f"/api/v1/nodes/{name}").get("status", {}).get("conditions", [])
                ),
                "the GPU-less node to be Ready",
            )
            code, findings = run_doctor(healthy.kubeconfig_path, dev_namespace)
        finally:
            api.delete(f"/api/v1/nodes/{name}")
    assert code == 1
    finding = named(findings, "gpu-allocatable", "fail", name)
    assert "driver" in finding["message"]
    assert "gpu-driver-version=latest" in finding["fix"]


def test_doctor_names_a_device_plugin_that_is_not_ready(
    healthy: Any, dev_namespace: str, tmp_path: Path
) -> None:
    rendered = render_elasticity(ElasticityInputs(deployment="svc", gpu_node_label=GPU_LABEL))
    broken = copy.deepcopy(rendered.manifests[0])
    broken["metadata"]["name"] = "nvidia-device-plugin-broken"
    labels = {"name": "nvidia-device-plugin-broken"}
    broken["spec"]["selector"]["matchLabels"] = labels
    broken["spec"]["template"]["metadata"]["labels"] = labels
    # Asks more CPU than a node has: its pods never run, as with a crash-looping plugin.
    broken["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    path = tmp_path / "broken-plugin.yaml"
    path.write_text(yaml.safe_dump(broken))
    kubectl(healthy, "apply", "-f", str(path))
    try:
        with healthy.api() as api:
            wait_for(
                lambda: int(
                    api.get("/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-broken")
                    .get("status", {})
                    .get("desiredNumberScheduled")
                    or 0
                ),
                "the broken DaemonSet to want pods",
            )
        code, findings = run_doctor(healthy.kubeconfig_path, dev_namespace)
    finally:
        kubectl(healthy, "delete", "--ignore-not-found", "-f", str(path))
    assert code == 1
    finding = named(findings, "device-plugin", "fail", "kube-system/nvidia-device-plugin-broken: 0 of")
    assert "logs" in finding["fix"]
    named(findings, "device-plugin", "pass", "nvidia-device-plugin-daemonset")


def test_doctor_names_a_missing_priority_class(healthy: Any, dev_namespace: str, tmp_path: Path) -> None:
    directory = write(tmp_path, render_gke(GKE).files)
    kubectl(healthy, "delete", "priorityclass", "eops-low")
    try:
        code, findings = run_doctor(healthy.kubeconfig_path, dev_namespace)
    finally:
        kubectl(healthy, "apply", "-f", str(directory / "priorityclasses.yaml"))
    assert code == 1
    finding = named(findings, "priority-classes", "fail", "eops-low")
    assert "priorityclasses.yaml" in finding["fix"]


def test_doctor_names_a_pod_without_the_gpu_toleration(healthy: Any, dev_namespace: str) -> None:
    ns = dev_namespace
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-toleration"},
        "spec": {
            # Selects GPU nodes but asks no GPU, so nothing adds the nvidia.com/gpu toleration.
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }
    with healthy.api() as api:
        api.create(f"/api/v1/namespaces/{ns}/pods", pod)
        wait_for(
            lambda: any(
                c.get("reason") == "Unschedulable"
                for c in api.get(f"/api/v1/namespaces/{ns}/pods/no-toleration")["status"].get(
                    "conditions", []
                )
            ),
            "the scheduler to give up on the pod",
        )
    code, findings = run_doctor(healthy.kubeconfig_path, ns)
    assert code == 1
    finding = named(findings, "pending-pods", "fail", "taint not tolerated")
    assert f"{ns}/no-toleration" in finding["message"]
    assert "nvidia.com/gpu" in finding["fix"]


def test_doctor_names_an_hpa_on_a_metric_nobody_serves(
    healthy: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ns = dev_namespace
    rendered = render_elasticity(ElasticityInputs(deployment="svc", namespace=ns, gpu_node_label=GPU_LABEL))
    directory = write(tmp_path, rendered.files)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "svc"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "svc"}},
            "template": {
                "metadata": {"labels": {"app": "svc"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        },
    }
    with healthy.api() as api:
        api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment)
    kubectl(healthy, "apply", "-f", str(directory / "hpa.yaml"))
    code, findings = run_doctor(healthy.kubeconfig_path, ns)
    assert code == 1
    finding = named(
        findings, "hpa", "fail", f"HPA {ns}/svc-gpu reads <unknown> for Pods metric gpu_utilization"
    )
    assert "v1beta1.custom.metrics.k8s.io is not registered" in finding["message"]
    assert "Prometheus Adapter" in finding["fix"]
    named(findings, "custom-metrics", "fail", "not registered")


def _limited_kubeconfig(cluster: Any, ns: str, rules: list[dict[str, Any]], path: Path) -> Path:
    """A kubeconfig for a ServiceAccount that holds `rules` in `ns` plus the node-reading rules."""
    account = "eops-limited"
    with cluster.api() as api:
        api.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": account}})
        api.create(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            {"metadata": {"name": account}, "rules": rules},
        )
        subject = [{"kind": "ServiceAccount", "name": account, "namespace": ns}]
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}
        api.create(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            {"metadata": {"name": account}, "subjects": subject, "roleRef": ref},
        )
        api.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {"metadata": {"name": f"{ns}-nodes"}, "rules": NODE_RULES},
        )
        api.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": f"{ns}-nodes"},
                "subjects": subject,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": f"{ns}-nodes",
                },
            },
        )
        token = api.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
    admin = yaml.safe_load(Path(cluster.kubeconfig_path).read_text())
    limited = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {
                "name": account,
                "context": {"cluster": admin["clusters"][0]["name"], "user": account, "namespace": ns},
            }
        ],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(limited))
    return path


def test_doctor_names_missing_job_permissions(healthy: Any, dev_namespace: str, tmp_path: Path) -> None:
    ns = dev_namespace
    without_jobs = [rule for rule in ROLE_RULES if "jobs" not in rule["resources"]]
    kubeconfig = _limited_kubeconfig(healthy, ns, without_jobs, tmp_path / "limited")
    try:
        code, findings = run_doctor(kubeconfig, ns)
        assert code == 1
        finding = named(findings, "permissions", "fail", "create jobs.batch")
        assert "system:serviceaccount:" + ns + ":eops-limited" in finding["message"]
        assert "--resource=jobs.batch" in finding["fix"]
        assert "pods" not in finding["message"].split("in namespace")[0]  # only what is missing
        # Grant the Job rules: the same identity now passes the permission check.
        with healthy.api() as api:
            api.patch(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/eops-limited",
                {"rules": ROLE_RULES},
            )
        _, findings = run_doctor(kubeconfig, ns)
        named(findings, "permissions", "pass", "permissions ElasticityOps needs are granted")
    finally:
        with healthy.api() as api:
            api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ns}-nodes")
            api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}-nodes")
