"""The Helm chart (charts/elasticityops) is what `eops render chart` writes, `helm lint` passes it,
and under any options `helm template` renders exactly the objects `eops render deploy` does (one
template, two back ends: ops/chart.py). The pinned helm is built by scripts/build-devcluster."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from elasticityops.backends.kubernetes.deploy import (
    CHART_VALUES,
    DeployOptions,
    SecretKey,
    WorkerSecret,
    build_deploy,
)
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.template import Condition, Value, When, evaluate, text
from elasticityops.cli.main import app
from elasticityops.domain.budget import GpuBudget
from elasticityops.ops import chart
from elasticityops.ops.chart_kueue import QUEUE_VALUES, QueueValues
from elasticityops.ops.kueue import KueueInputs, kueue_manifests
from helpers.server import REPO

CHART_DIR = REPO / "charts" / "elasticityops"


def values_of(options: DeployOptions, queues: QueueValues | None = None) -> dict[str, Any]:
    """The chart values under which the chart renders what `build_deploy(options)` does (but the
    Namespace: the release's, `helm install -n`), and with `queues.create` what `eops render
    kueue` does for `queues.inputs`."""
    values: dict[str, Any] = {}
    read: list[tuple[Value, Any]] = [(value, options) for value in CHART_VALUES]
    read += [(value, queues or QueueValues()) for value in QUEUE_VALUES]
    for value, source in read:
        assert value.path is not None
        *parents, leaf = value.path.split(".")
        branch = values
        for part in parents:
            branch = branch.setdefault(part, {})
        branch[leaf] = value.of(source)
    return values


def _helm(helm: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *argv], capture_output=True, text=True, timeout=60, check=False)


def _template(
    helm: str, values: dict[str, Any], tmp_path: Path, namespace: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(values))
    return _helm(helm, "template", "eops", str(CHART_DIR), "-n", namespace, "-f", str(path))


def _by_identity(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_the_committed_chart_is_what_render_chart_writes() -> None:
    found = {str(p.relative_to(CHART_DIR)): p.read_text() for p in CHART_DIR.rglob("*") if p.is_file()}
    stale = chart.differences(chart.render_chart(), found)
    assert not stale, f"charts/elasticityops is out of date in {stale}: run `eops render chart`"


def test_render_chart_check_says_which_file_is_stale(tmp_path: Path) -> None:
    out = tmp_path / "chart"

    def render(*extra: str) -> Result:
        return CliRunner().invoke(app, ["render", "chart", "--out", str(out), *extra], env={"COLUMNS": "400"})

    assert render().exit_code == 0
    (out / "templates" / "leftover.yaml").write_text("kind: ConfigMap\n")
    values = out / "values.yaml"
    values.write_text(values.read_text().replace("replicas: 1", "replicas: 2"))
    checked = render("--check")
    assert checked.exit_code == 1
    assert "values.yaml: not what" in checked.stderr
    assert "leftover.yaml: not what" in checked.stderr
    assert render().exit_code == 0
    assert not (out / "templates" / "leftover.yaml").exists()
    assert render("--check").exit_code == 0


OPTIONS = [
    pytest.param(DeployOptions(), id="defaults"),
    pytest.param(DeployOptions(replicas=3, database_url_secret=SecretKey("eops-db")), id="replicas"),
    pytest.param(
        DeployOptions(
            kubernetes=KubernetesSettings(namespace="gpu", instance="blue", gpu_driver_version="latest"),
            image="reg.example/eops:2",
            gpu_budget=GpuBudget(per_type=(("nvidia-tesla-t4", 8), ("nvidia-l4", 2))),
            storage="5Gi",
            storage_class="fast",
            database_url_secret=SecretKey("db.prod", "URL"),
            cpu_request="1",
            memory_request="1Gi",
            memory_limit="2Gi",
            priority_classes=False,
            service_monitor=True,
            scrape_interval="15s",
            metrics_token_secret=SecretKey("eops-scrape", "token"),
        ),
        id="every-value-set",
    ),
    pytest.param(
        DeployOptions(
            replicas=2, database_url_secret=SecretKey("eops-db", "url"), gpu_budget=GpuBudget(total=40)
        ),
        id="replicas-with-a-budget",
    ),
    pytest.param(DeployOptions(kubernetes=KubernetesSettings(workload="pod")), id="bare-pods"),
    pytest.param(DeployOptions(admission="kueue"), id="kueue"),
    pytest.param(
        DeployOptions(
            admission="kueue", kubernetes=KubernetesSettings(namespace="gpu", local_queue="team-a")
        ),
        id="kueue-local-queue",
    ),
    pytest.param(
        DeployOptions(
            admission="kueue",
            worker_secrets=(
                WorkerSecret("worker-1", SecretKey("eops-worker-1", "kubeconfig")),
                WorkerSecret("us-east.worker-2", SecretKey("eops-w2", "config")),
            ),
        ),
        id="multikueue-workers",
    ),
    pytest.param(
        DeployOptions(
            admission="kueue",
            kubernetes=KubernetesSettings(nominate_wait_s=30.0),
            worker_secrets=(WorkerSecret("worker-1", SecretKey("eops-worker-1", "kubeconfig")),),
        ),
        id="multikueue-the-gateway-nominates",
    ),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_helm_template_renders_what_render_deploy_renders(
    helm_binary: str, options: DeployOptions, tmp_path: Path
) -> None:
    done = _template(helm_binary, values_of(options), tmp_path, options.kubernetes.namespace)
    assert done.returncode == 0, done.stderr
    from_helm = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    rendered = [o for o in build_deploy(options) if o["kind"] != "Namespace"]  # the release's own
    assert _by_identity(from_helm) == _by_identity(rendered)
    assert len(from_helm) == len(rendered)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {"replicas": 3, "database": {"secretName": "eops-db"}, "serviceMonitor": {"enabled": True}},
            id="replicas-and-monitor",
        ),
        pytest.param(
            {"serviceMonitor": {"enabled": True}, "metrics": {"tokenSecretName": "eops-scrape"}},
            id="monitor-with-a-scrape-token",
        ),
        pytest.param(
            {
                "kueue": {
                    "enabled": True,
                    "queues": {"create": True, "gpuBudget": "nvidia-tesla-t4=8,nvidia-l4=2"},
                }
            },
            id="kueue-with-queues",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "workers": [{"name": "worker-1", "kubeconfigSecret": "eops-w1"}]}},
            id="kueue-with-workers",
        ),
    ],
)
def test_helm_lint_passes(helm_binary: str, values: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    done = _helm(helm_binary, "lint", "--strict", str(CHART_DIR), "-f", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("values", "words"),
    [
        pytest.param(
            {"replicas": 2}, "database.secretName is required with replicas above 1", id="no-database"
        ),
        pytest.param({"replicas": 0}, "/replicas", id="no-replicas"),
        pytest.param({"replica": 2}, "additional properties 'replica' not allowed", id="typo"),
        pytest.param({"kubernetes": {"gpuDriverVersion": "newest"}}, "value must be one of", id="bad-driver"),
        pytest.param({"database": {"secretName": "Eops_DB"}}, "/database/secretName", id="bad-secret-name"),
        pytest.param(
            {"kueue": {"enabled": True}, "gpuBudget": "8"},
            "gpuBudget is not for kueue.enabled: the ClusterQueue's quota is the one GPU cap",
            id="kueue-with-a-budget",
        ),
        pytest.param(
            {"kueue": {"enabled": True}, "kubernetes": {"workload": "pod"}},
            "kubernetes.workload pod is not for kueue.enabled",
            id="kueue-with-bare-pods",
        ),
        pytest.param(
            {"kueue": {"queues": {"create": True, "gpuBudget": "nvidia-tesla-t4=1"}}},
            "set kueue.enabled=true too",
            id="queues-without-kueue",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "queues": {"create": True}}},
            "kueue.queues.gpuBudget is required with kueue.queues.create",
            id="queues-without-a-budget",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "queues": {"create": True, "gpuBudget": "8"}}},
            "/kueue/queues/gpuBudget",
            id="queues-with-a-bare-number",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "queues": {"create": True, "gpuBudget": "nvidia-l4=1,nvidia-l4=2"}}},
            "names a GPU type twice",
            id="queues-with-a-type-twice",
        ),
        pytest.param(
            {"kueue": {"queues": {"provisioningClass": "dws"}}},
            "/kueue/queues/provisioningClass",
            id="bad-provisioning-class",
        ),
        pytest.param(
            {"kueue": {"workers": [{"name": "worker-1", "kubeconfigSecret": "w1"}]}},
            "kueue.workers names MultiKueue's workers, but the gateway admits by itself: set "
            "kueue.enabled=true",
            id="workers-without-kueue",
        ),
        pytest.param(
            {
                "kueue": {
                    "enabled": True,
                    "workers": [
                        {"name": "worker-1", "kubeconfigSecret": "w1"},
                        {"name": "worker-1", "kubeconfigSecret": "w1-again"},
                    ],
                }
            },
            "kueue.workers names worker-1 twice: name each worker once",
            id="worker-named-twice",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "workers": [{"name": "worker-1"}]}},
            "missing property 'kubeconfigSecret'",
            id="worker-without-its-secret",
        ),
        pytest.param(
            {"kueue": {"enabled": True, "workers": [{"name": "Worker_1", "kubeconfigSecret": "w1"}]}},
            "/kueue/workers/0/name",
            id="bad-worker-name",
        ),
    ],
)
def test_the_chart_refuses_values_render_deploy_refuses(
    helm_binary: str, values: dict[str, Any], words: str, tmp_path: Path
) -> None:
    done = _template(helm_binary, values, tmp_path, "elasticityops")
    assert done.returncode != 0
    assert words in done.stderr


def test_a_gpu_budget_given_as_a_number_is_still_text(helm_binary: str, tmp_path: Path) -> None:
    done = _helm(helm_binary, "template", "eops", str(CHART_DIR), "--set", "gpuBudget=8")
    assert done.returncode == 0, done.stderr
    deployment = next(d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EOPS_GPU_BUDGET"] == "8"


KUEUE_INPUTS = [
    pytest.param(
        KueueInputs(gpu_budget="nvidia-tesla-t4=8,nvidia-l4=2", namespace="gpu", local_queue="team-a"),
        id="dws",
    ),
    pytest.param(
        KueueInputs(
            gpu_budget="nvidia-h100-80gb=16",
            namespace="eops",
            cluster_queue="research",
            provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        ),
        id="upstream-class-unknown-machine",
    ),
    pytest.param(
        KueueInputs(gpu_budget="nvidia-tesla-t4=3", namespace="elasticityops", provisioning_class="none"),
        id="no-admission-check",
    ),
]


@pytest.mark.parametrize("inputs", KUEUE_INPUTS)
def test_the_kueue_toggle_renders_what_render_kueue_renders_and_sets_the_env(
    helm_binary: str, inputs: KueueInputs, tmp_path: Path
) -> None:
    options = DeployOptions(
        admission="kueue",
        kubernetes=KubernetesSettings(namespace=inputs.namespace, local_queue=inputs.local_queue),
    )
    values = values_of(options, QueueValues(create=True, inputs=inputs))
    done = _template(helm_binary, values, tmp_path, inputs.namespace)
    assert done.returncode == 0, done.stderr
    from_helm = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    kueue = [doc for doc in from_helm if doc["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert _by_identity(kueue) == _by_identity(kueue_manifests(inputs))
    assert len(kueue) == len(kueue_manifests(inputs))
    # The rest is the gateway of `eops render deploy --admission kueue --kube-local-queue ...`.
    gateway = [doc for doc in from_helm if doc not in kueue]
    assert _by_identity(gateway) == _by_identity(
        [o for o in build_deploy(options) if o["kind"] != "Namespace"]
    )
    [deployment] = [doc for doc in gateway if doc["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["EOPS_ADMISSION"], env["EOPS_KUBE_LOCAL_QUEUE"]) == ("kueue", inputs.local_queue)
    assert "EOPS_GPU_BUDGET" not in env


def test_workers_mount_their_kubeconfigs_and_name_them_to_the_gateway(
    helm_binary: str, tmp_path: Path
) -> None:
    """kueue.workers without kubeconfigKey: the key is `kubeconfig`, each file is named for its
    worker, and EOPS_KUBE_WORKERS points the gateway at them (as --kube-workers would)."""
    values = {
        "kueue": {
            "enabled": True,
            "workers": [
                {"name": "worker-1", "kubeconfigSecret": "eops-worker-1"},
                {"name": "worker-2", "kubeconfigSecret": "eops-worker-2", "kubeconfigKey": "config"},
            ],
        }
    }
    done = _template(helm_binary, values, tmp_path, "elasticityops")
    assert done.returncode == 0, done.stderr
    deployment = next(d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (
        env["EOPS_KUBE_WORKERS"] == "worker-1=/etc/eops/workers/worker-1,worker-2=/etc/eops/workers/worker-2"
    )
    [volume] = [v for v in pod["volumes"] if v["name"] == "kube-workers"]
    assert volume["projected"]["sources"] == [
        {"secret": {"name": "eops-worker-1", "items": [{"key": "kubeconfig", "path": "worker-1"}]}},
        {"secret": {"name": "eops-worker-2", "items": [{"key": "config", "path": "worker-2"}]}},
    ]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "kube-workers"]
    assert mount == {"name": "kube-workers", "mountPath": "/etc/eops/workers", "readOnly": True}
    plain = _template(helm_binary, {"kueue": {"enabled": True}}, tmp_path, "elasticityops")
    assert "kube-workers" not in plain.stdout
    assert "EOPS_KUBE_WORKERS" not in plain.stdout


def test_without_the_toggle_the_chart_renders_no_kueue_object(helm_binary: str, tmp_path: Path) -> None:
    enabled = values_of(DeployOptions(admission="kueue"))  # admission through Kueue, queues not made
    for values in ({}, enabled):
        done = _template(helm_binary, values, tmp_path, "elasticityops")
        assert done.returncode == 0, done.stderr
        docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
        assert docs
        assert not [doc["kind"] for doc in docs if doc["apiVersion"].startswith("kueue.x-k8s.io/")]


def test_every_value_is_documented_with_its_flag() -> None:
    values = yaml.safe_load(chart.values_yaml())
    assert values == values_of(DeployOptions())
    for line in (
        "--replicas; 1 to 100",
        "--database-url-secret",
        "--priority-classes",
        "--service-monitor",
        "--kube-local-queue",
        "--provisioning-class",
        "--cluster-queue",
    ):
        assert line in chart.values_yaml()
    # The Kueue objects' values are `eops render kueue`'s flags.
    assert "(eops render kueue --cluster-queue)" in chart.readme()
    schema = json.loads(chart.values_schema())
    assert schema["properties"]["replicas"] == {
        "type": "integer",
        "description": schema["properties"]["replicas"]["description"],
        "minimum": 1,
        "maximum": 100,
    }


# The emitter on a template of its own: every kind of node in every place it can stand, each
# combination of two switches rendered by helm and by evaluate().
_A = Value("a", lambda o: o["a"])
_B = Value("b", lambda o: o["b"])
_NAME = Value("name", lambda o: o["name"])
_ON_A = Condition(lambda o: bool(o["a"]), ".Values.a", (_A,))
_ON_B = Condition(lambda o: bool(o["b"]), ".Values.b", (_B,))
_TOY: list[Any] = [
    When(
        _ON_A,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "only-with-a"},
            "data": {"k": "v"},
        },
    ),
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": text("toy-", _NAME, "-x"), "labels": When(_ON_B, {"b": "yes"})},
        "data": {
            "first": When(_ON_A, "with a", "without a"),
            "nested": When(_ON_A, When(_ON_B, "a and b", "a only")),
            "port": "8080",
            "flag": When(_ON_B, "true"),
        },
        "items": [
            When(_ON_A, {"conditional-first-key": When(_ON_B, "b"), "always": 1}),
            {"plain": [When(_ON_B, "x"), "y", {}]},
            When(_ON_B, [1, 2], "no b"),
        ],
    },
]


def _toy_chart(tmp_path: Path) -> Path:
    root = tmp_path / "toy"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: toy\nversion: 0.1.0\n")
    (root / "templates" / "toy.yaml").write_text(chart.template_text(_TOY) + "\n")
    return root


@pytest.mark.parametrize("a", [True, False], ids=["a", "no-a"])
@pytest.mark.parametrize("b", [True, False], ids=["b", "no-b"])
def test_the_emitter_writes_what_evaluate_means(helm_binary: str, tmp_path: Path, a: bool, b: bool) -> None:
    root = _toy_chart(tmp_path)
    done = _helm(
        helm_binary, "template", "t", str(root), "--set", f"a={str(a).lower()},b={str(b).lower()},name=n1"
    )
    assert done.returncode == 0, done.stderr
    from_helm = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    assert from_helm == evaluate(_TOY, {"a": a, "b": b, "name": "n1"})
