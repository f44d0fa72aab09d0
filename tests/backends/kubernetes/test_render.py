"""`eops render job` and `eops render deploy`: YAML that kubectl takes (applied for real, with a
server-side dry run, in test_cluster.py), and clear errors for bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticityops.backends.kubernetes.deploy import (
    ROLE_RULES,
    DeployOptions,
    SecretKey,
    build_deploy,
    parse_secret_key,
)
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.errors import InvalidInput
from helpers.eops_in_process import run_eops
from helpers.server import EOPS, REPO, base_env


def _eops(*argv: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`eops ARGV`: its entry point in this pytest (tests/helpers/eops_in_process.py), or a real
    process when `process` (test_render_job_prints_the_job: the render family's one)."""
    if process:
        return subprocess.run([EOPS, *argv], capture_output=True, text=True, timeout=60, check=False)
    return subprocess.CompletedProcess([EOPS, *argv], *run_eops(list(argv), base_env(), REPO))


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
        process=True,
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
        pytest.param(
            ["render", "deploy", "--replicas", "3"],
            "--database-url-secret: is required with --replicas 3",
            id="replicas-without-a-database",
        ),
        pytest.param(
            ["render", "deploy", "--replicas", "0"], "--replicas: invalid value '0'", id="no-replicas"
        ),
        pytest.param(
            ["render", "deploy", "--replicas", "2", "--database-url-secret", "Eops_DB"],
            "--database-url-secret: invalid value 'Eops_DB'",
            id="bad-secret-name",
        ),
        pytest.param(
            ["render", "deploy", "--admission", "kueue", "--gpu-budget", "8"],
            "--gpu-budget: with --admission kueue the ClusterQueue's quota is the one GPU cap",
            id="kueue-with-a-budget",
        ),
        pytest.param(
            ["render", "deploy", "--admission", "kueue", "--kube-workload", "pod"],
            "--kube-workload: Kueue admits the gateway's Jobs",
            id="kueue-with-bare-pods",
        ),
        pytest.param(
            ["render", "deploy", "--kube-local-queue", "team-a"],
            "--kube-local-queue: names a Kueue LocalQueue, but the gateway admits by itself; add "
            "--admission kueue",
            id="local-queue-without-kueue",
        ),
        pytest.param(
            ["render", "deploy", "--kube-worker-secrets", "worker-1=eops-w1"],
            "--kube-worker-secrets: names MultiKueue's workers, but the gateway admits by itself; add "
            "--admission kueue",
            id="workers-without-kueue",
        ),
        pytest.param(
            ["render", "deploy", "--admission", "kueue", "--kube-worker-secrets", "w1=a,w1=b"],
            "--kube-worker-secrets: invalid value 'w1=a,w1=b': w1 is named twice; name each worker once",
            id="worker-named-twice",
        ),
        pytest.param(
            ["render", "deploy", "--admission", "kueue", "--kube-worker-secrets", "worker-1"],
            "'worker-1' is not NAME=SECRET[:KEY]; e.g. worker-1=eops-worker-1",
            id="worker-without-its-secret",
        ),
        pytest.param(
            ["render", "deploy", "--admission", "kueue", "--kube-worker-secrets", "w1=Eops_W1"],
            "'Eops_W1', the Secret of w1, is not SECRET[:KEY]",
            id="bad-worker-secret",
        ),
    ],
)
def test_bad_input_names_the_field(argv: list[str], words: str) -> None:
    done = _eops(*argv)
    assert done.returncode == 2
    assert words in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "queue"),
    [
        (["--admission", "kueue"], "eops"),
        (["--admission", "kueue", "--kube-local-queue", "team-a"], "team-a"),
    ],
)
def test_render_deploy_with_kueue_admission_sets_the_gateways_env(argv: list[str], queue: str) -> None:
    done = _eops("render", "deploy", *argv)
    assert done.returncode == 0, done.stderr
    [deployment] = [o for o in yaml.safe_load_all(done.stdout) if o["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["EOPS_ADMISSION"], env["EOPS_KUBE_LOCAL_QUEUE"]) == ("kueue", queue)
    plain = _eops("render", "deploy")
    assert "EOPS_ADMISSION" not in plain.stdout
    assert "EOPS_KUBE_LOCAL_QUEUE" not in plain.stdout


def test_render_deploy_mounts_each_workers_kubeconfig_and_names_it_to_the_gateway() -> None:
    done = _eops(
        "render",
        "deploy",
        "--admission",
        "kueue",
        "--kube-worker-secrets",
        "worker-1=eops-w1,worker-2=eops-w2:config",
    )
    assert done.returncode == 0, done.stderr
    [deployment] = [o for o in yaml.safe_load_all(done.stdout) if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # The paths are what `eops serve --kube-workers` reads: the projected volume's files.
    workers = dict(item.split("=") for item in env["EOPS_KUBE_WORKERS"].split(","))
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "kube-workers"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "kube-workers"]
    files = {
        f"{mount['mountPath']}/{item['path']}": (source["secret"]["name"], item["key"])
        for source in volume["projected"]["sources"]
        for item in source["secret"]["items"]
    }
    assert {name: files[path] for name, path in workers.items()} == {
        "worker-1": ("eops-w1", "kubeconfig"),
        "worker-2": ("eops-w2", "config"),
    }
    assert mount["readOnly"] is True
    assert "kube-workers" not in _eops("render", "deploy", "--admission", "kueue").stdout


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


def test_bare_pods_may_create_and_delete_pods_and_nothing_more() -> None:
    options = DeployOptions(kubernetes=KubernetesSettings(workload="pod"))
    objects = build_deploy(options)
    role = next(o for o in objects if o["kind"] == "Role")
    default_role = next(o for o in build_deploy(DeployOptions()) if o["kind"] == "Role")
    added = [rule for rule in role["rules"] if rule not in default_role["rules"]]
    assert added == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EOPS_KUBE_WORKLOAD"] == "pod"
    assert "EOPS_KUBE_WORKLOAD" not in str(build_deploy(DeployOptions()))


def test_render_job_prints_the_bare_pod_with_the_pod_workload(function_file: Path) -> None:
    done = _eops("render", "job", str(function_file), "--invocation-id", "inv-abc", "--kube-workload", "pod")
    assert done.returncode == 0, done.stderr
    [pod] = list(yaml.safe_load_all(done.stdout))
    assert pod["kind"] == "Pod"
    assert pod["metadata"]["name"] == "eops-inv-abc"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["activeDeadlineSeconds"] > 0


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


HA = DeployOptions(replicas=3, database_url_secret=SecretKey("eops-db"))


def _kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _kind(objects, "Deployment")["spec"]["template"]["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        pytest.param("eops-db", SecretKey("eops-db", "database-url"), id="name-only-default-key"),
        pytest.param("eops-db:url", SecretKey("eops-db", "url"), id="name-and-key"),
        pytest.param(" db.prod:URL ", SecretKey("db.prod", "URL"), id="dotted-name-upper-key"),
        pytest.param("", None, id="empty-is-unset"),
    ],
)
def test_database_url_secret_parses(raw: str, parsed: SecretKey | None) -> None:
    assert parse_secret_key(raw) == parsed


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        pytest.param("Eops_DB", "is not a Secret name", id="upper-case-name"),
        pytest.param("eops-db:", "is not a Secret key", id="empty-key"),
        pytest.param("eops-db:a/b", "is not a Secret key", id="slash-in-key"),
        pytest.param(":url", "is not a Secret name", id="no-name"),
    ],
)
def test_bad_database_url_secret_says_why(raw: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_secret_key(raw)


def test_one_replica_with_a_database_secret_only_adds_the_url() -> None:
    plain = build_deploy(DeployOptions())
    with_db = build_deploy(DeployOptions(database_url_secret=SecretKey("eops-db", "url")))
    env = _pod(with_db)["containers"][0]["env"]
    assert env[-1] == {
        "name": "EOPS_DATABASE_URL",
        "valueFrom": {"secretKeyRef": {"name": "eops-db", "key": "url"}},
    }
    del env[-1]
    assert with_db == plain  # the volume, the Recreate strategy, the Role: all as before


def test_several_replicas_need_a_shared_database() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_deploy(DeployOptions(replicas=2))
    [problem] = caught.value.problems
    assert problem.field == "--database-url-secret"
    assert "--replicas 2" in problem.problem
    assert "kubectl -n elasticityops create secret generic eops-db" in problem.fix


def test_replicas_elect_a_leader_and_share_postgresql() -> None:
    objects = build_deploy(HA)
    deployment = _kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    container = _pod(objects)["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["EOPS_LEADER_ELECT"]["value"] == "true"
    assert env["EOPS_LEADER_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["EOPS_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "eops-db", "key": "database-url"}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # No SQLite volume to share: the data dir is each pod's own; the token key is in the database.
    assert "PersistentVolumeClaim" not in {o["kind"] for o in objects}
    volumes = {v["name"]: v for v in _pod(objects)["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    assert set(volumes) == {"data", "tmp"}


def test_replicas_spread_over_nodes_and_zones_and_keep_one_ready() -> None:
    objects = build_deploy(HA)
    labels = _kind(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    anti = _pod(objects)["affinity"]["podAntiAffinity"]
    terms = [t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]]
    assert [(t["topologyKey"], t["labelSelector"]) for t in terms] == [
        ("kubernetes.io/hostname", {"matchLabels": labels}),
        ("topology.kubernetes.io/zone", {"matchLabels": labels}),
    ]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti  # one node still runs them all
    budget = _kind(objects, "PodDisruptionBudget")
    assert budget["apiVersion"] == "policy/v1"
    assert budget["metadata"]["namespace"] == "elasticityops"
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": labels}}


def _lease_grants(objects: list[dict[str, Any]]) -> set[tuple[str, str | None]]:
    return {
        (verb, name)
        for rule in _kind(objects, "Role")["rules"]
        if rule["resources"] == ["leases"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [None]
    }


def test_replicas_may_only_read_create_and_renew_their_lease() -> None:
    rules = _kind(build_deploy(HA), "Role")["rules"]
    assert all(r["apiGroups"] == ["coordination.k8s.io"] for r in rules if r["resources"] == ["leases"])
    # create cannot be limited by name (the API server authorises it before the name exists).
    assert _lease_grants(build_deploy(HA)) == {
        ("get", "elasticityops"),
        ("update", "elasticityops"),
        ("create", None),
    }
    assert rules[: len(ROLE_RULES)] == ROLE_RULES
    assert _lease_grants(build_deploy(DeployOptions())) == set()


def test_render_deploy_replicas_from_the_command_line() -> None:
    done = _eops("render", "deploy", "--replicas", "2", "--database-url-secret", "eops-db:url")
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    assert _kind(objects, "Deployment")["spec"]["replicas"] == 2
    env = {e["name"]: e for e in _pod(objects)["containers"][0]["env"]}
    assert env["EOPS_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "eops-db", "key": "url"}
    assert "PodDisruptionBudget" in {o["kind"] for o in objects}


def test_a_scrape_token_secret_reaches_the_gateway_and_the_service_monitor() -> None:
    done = _eops("render", "deploy", "--service-monitor", "--metrics-token-secret", "eops-scrape")
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    env = {e["name"]: e for e in _pod(objects)["containers"][0]["env"]}
    ref = {"name": "eops-scrape", "key": "metrics-token"}
    assert env["EOPS_METRICS_TOKEN"]["valueFrom"]["secretKeyRef"] == ref
    [endpoint] = _kind(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": ref}
    plain = build_deploy(DeployOptions(service_monitor=True))
    assert "EOPS_METRICS_TOKEN" not in {e["name"] for e in _pod(plain)["containers"][0]["env"]}
    assert "authorization" not in _kind(plain, "ServiceMonitor")["spec"]["endpoints"][0]
    bad = _eops("render", "deploy", "--metrics-token-secret", "Eops_Scrape")
    assert bad.returncode == 2
    assert "--metrics-token-secret" in bad.stderr
    assert "not a Secret name" in bad.stderr


def test_render_deploy_leaves_out_priority_classes_and_adds_a_service_monitor_when_asked() -> None:
    done = _eops(
        "render",
        "deploy",
        "--no-priority-classes",
        "--service-monitor",
        "--scrape-interval",
        "15s",
        "--cpu",
        "2",
    )
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    assert "PriorityClass" not in {o["kind"] for o in objects}
    monitor = _kind(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    service = _kind(objects, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert _pod(objects)["containers"][0]["resources"]["requests"]["cpu"] == "2"
    assert "ServiceMonitor" not in {o["kind"] for o in build_deploy(DeployOptions())}
