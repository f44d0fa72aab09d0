"""The Job and Secret of an invocation: every field a GPU job on GKE needs."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from elasticityops.backends.kubernetes.labels import selector
from elasticityops.backends.kubernetes.machines import (
    MACHINES,
    allocatable,
    parse_cpu_millis,
    parse_memory_mib,
    whole_node_requests,
)
from elasticityops.backends.kubernetes.manifests import build_job, build_payload_secret, job_name
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import InvalidInput
from elasticityops.domain.functions import Priority

from .builders import INV, invocation, spec

SETTINGS = KubernetesSettings(namespace="gpu-jobs", instance="gw1", ttl_after_finished_seconds=1800)


def _job(**fields: Any) -> dict[str, Any]:
    return build_job(spec(**fields), invocation(), SETTINGS, "http://gw:8080/v1/invocations/x/result")


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    return _pod_spec(job)["containers"][0]  # type: ignore[no-any-return]


FIELDS = [
    pytest.param(lambda j: j["metadata"]["name"], f"eops-{INV}", id="name-from-invocation-id"),
    pytest.param(lambda j: j["metadata"]["namespace"], "gpu-jobs", id="namespace"),
    pytest.param(lambda j: j["spec"]["backoffLimit"], 0, id="backoff-limit-0"),
    pytest.param(lambda j: j["spec"]["activeDeadlineSeconds"], 3600, id="deadline-from-timeout"),
    pytest.param(lambda j: j["spec"]["ttlSecondsAfterFinished"], 1800, id="ttl-after-finished"),
    pytest.param(lambda j: _pod_spec(j)["restartPolicy"], "Never", id="restart-never"),
    pytest.param(lambda j: len(_pod_spec(j)["containers"]), 1, id="one-container"),
    pytest.param(lambda j: _pod_spec(j)["priorityClassName"], "eops-normal", id="priority-class"),
    pytest.param(
        lambda j: _pod_spec(j)["tolerations"],
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        id="gpu-toleration",
    ),
    pytest.param(
        lambda j: _pod_spec(j)["nodeSelector"],
        {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
        id="accelerator-selector",
    ),
    pytest.param(lambda j: _container(j)["resources"]["limits"]["nvidia.com/gpu"], "1", id="gpu-limit"),
    pytest.param(lambda j: _container(j)["image"], "worker:1", id="image"),
    pytest.param(lambda j: _container(j)["command"], ["python", "w.py"], id="command-as-argv"),
    pytest.param(
        lambda j: _container(j)["terminationMessagePolicy"], "FallbackToLogsOnError", id="termination-policy"
    ),
    pytest.param(
        lambda j: _container(j)["terminationMessagePath"], "/dev/termination-log", id="termination-path"
    ),
    pytest.param(
        lambda j: j["spec"]["template"]["metadata"]["annotations"][
            "cluster-autoscaler.kubernetes.io/safe-to-evict"
        ],
        "false",
        id="not-safe-to-evict",
    ),
    pytest.param(
        lambda j: j["spec"]["template"]["metadata"]["labels"],
        {
            "app.kubernetes.io/managed-by": "elasticityops",
            "elasticityops.dev/instance": "gw1",
            "elasticityops.dev/function": "embed",
            "elasticityops.dev/invocation": INV,
            "elasticityops.dev/gpu-type": "nvidia-tesla-t4",
            "elasticityops.dev/attempt": "0",
        },
        id="pod-labels",
    ),
    pytest.param(
        lambda j: j["metadata"]["labels"] == j["spec"]["template"]["metadata"]["labels"],
        True,
        id="job-labels",
    ),
    pytest.param(
        lambda j: _pod_spec(j)["volumes"][0]["secret"]["secretName"], f"eops-{INV}", id="payload-volume"
    ),
    pytest.param(lambda j: _pod_spec(j)["automountServiceAccountToken"], False, id="no-api-token"),
]


@pytest.mark.parametrize(("get", "expected"), FIELDS)
def test_job_field(get: Any, expected: Any) -> None:
    assert get(_job()) == expected


def test_env_names_match_the_local_backend() -> None:
    env = {e["name"]: e for e in _container(_job(env={"MODEL": "clip"}))["env"]}
    assert env["MODEL"]["value"] == "clip"
    assert env["EOPS_INVOCATION_ID"]["value"] == INV
    assert env["EOPS_PAYLOAD_PATH"]["value"] == "/var/run/eops/payload"
    assert env["EOPS_RESULT_PATH"]["value"] == "/dev/termination-log"
    assert env["EOPS_CALLBACK_URL"]["value"] == "http://gw:8080/v1/invocations/x/result"
    # The token is read from the Secret, never written into the Job spec.
    assert env["EOPS_CALLBACK_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": f"eops-{INV}",
        "key": "callback-token",
    }


def test_no_callback_url_means_no_variable() -> None:
    job = build_job(spec(), invocation(), SETTINGS, None)
    assert "EOPS_CALLBACK_URL" not in {e["name"] for e in _container(job)["env"]}


@pytest.mark.parametrize(
    ("priority", "klass"),
    [pytest.param(p, f"eops-{p.value}", id=p.value) for p in Priority],
)
def test_priority_class_per_priority(priority: Priority, klass: str) -> None:
    job = build_job(spec(), invocation(priority=priority), SETTINGS)
    assert _pod_spec(job)["priorityClassName"] == klass


def test_driver_selector_when_configured() -> None:
    job = build_job(
        spec(gpu={"type": "nvidia-l4"}), invocation(), replace(SETTINGS, gpu_driver_version="latest")
    )
    assert _pod_spec(job)["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "cloud.google.com/gke-gpu-driver-version": "latest",
    }


def test_gpu_count_is_request_and_limit() -> None:
    resources = _container(_job(gpu={"count": 4}, machine_type="n1-standard-32"))["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "4"
    assert resources["requests"]["nvidia.com/gpu"] == "4"


@pytest.mark.parametrize("machine", list(MACHINES), ids=list(MACHINES))
def test_sized_requests_fit_once_and_never_twice(machine: str) -> None:
    requests = _container(_job(machine_type=machine))["resources"]["requests"]
    alloc = allocatable(MACHINES[machine])
    cpu, memory = parse_cpu_millis(requests["cpu"]), parse_memory_mib(requests["memory"])
    assert cpu <= alloc.cpu_millis
    assert memory <= alloc.memory_mib
    assert cpu > alloc.cpu_millis / 2 or memory > alloc.memory_mib / 2


def test_n1_standard_4_allocatable_matches_gke() -> None:
    # GKE: 3920m CPU; 15 GiB less 2.5 GiB reserved less the 100 MiB eviction threshold.
    alloc = allocatable(MACHINES["n1-standard-4"])
    assert (alloc.cpu_millis, alloc.memory_mib) == (3920, 12700)
    assert whole_node_requests(MACHINES["n1-standard-4"], 400, 1024).cpu_millis == 3520


def test_explicit_resources_are_kept() -> None:
    resources = _container(_job(resources={"cpu": "3", "memory": "12Gi"}))["resources"]
    assert resources["requests"]["cpu"] == "3"
    assert resources["requests"]["memory"] == "12Gi"
    assert resources["limits"]["memory"] == "12Gi"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"resources": {"cpu": "8"}}, "resources.cpu", id="cpu-over-allocatable"),
        pytest.param({"resources": {"memory": "15Gi"}}, "resources.memory", id="memory-over-allocatable"),
        pytest.param({"machine_type": "e2-mystery-3"}, "machine_type", id="unknown-machine"),
    ],
)
def test_requests_that_cannot_schedule_are_refused(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        _job(**fields)
    assert [p.field for p in caught.value.problems] == [field]
    assert caught.value.problems[0].fix


def test_unknown_machine_with_explicit_resources_is_fine() -> None:
    resources = _container(_job(machine_type="e2-mystery-3", resources={"cpu": "2", "memory": "4Gi"}))[
        "resources"
    ]
    assert resources["requests"]["cpu"] == "2"


@pytest.mark.parametrize(
    ("inv_id", "expected"),
    [
        pytest.param(INV, f"eops-{INV}", id="usual-id"),
        pytest.param("x" * 60, "eops-" + "0", id="too-long-is-hashed"),
        pytest.param("Inv_Upper", "eops-", id="not-dns-is-hashed"),
    ],
)
def test_job_name_is_deterministic_and_dns_safe(inv_id: str, expected: str) -> None:
    name = job_name(inv_id)
    assert name == job_name(inv_id)
    assert len(name) <= 52
    assert name == name.lower()
    assert name.startswith("eops-")
    if expected == f"eops-{INV}":
        assert name == expected


def test_a_later_attempt_has_a_job_and_secret_of_its_own() -> None:
    # Attempt 0 keeps the name Jobs always had; a requeued attempt never meets the old Job.
    assert job_name(INV, 0) == job_name(INV) == f"eops-{INV}"
    names = {job_name(INV, attempt) for attempt in range(11)}
    assert len(names) == 11
    assert job_name(INV, 2) == f"eops-{INV}-a2"
    assert all(len(name) <= 52 for name in names)
    assert job_name("x" * 60, 1) != job_name("x" * 60, 0)
    inv = replace(invocation(INV), attempt=2)
    job = build_job(spec(), inv, SETTINGS)
    assert job["metadata"]["name"] == f"eops-{INV}-a2"
    assert job["spec"]["template"]["metadata"]["labels"]["elasticityops.dev/attempt"] == "2"
    assert _pod_spec(job)["volumes"][0]["secret"]["secretName"] == f"eops-{INV}-a2"
    secret = build_payload_secret(INV, b"{}", "tok", "uid", SETTINGS, 2)
    assert secret["metadata"]["name"] == f"eops-{INV}-a2"
    assert secret["metadata"]["labels"]["elasticityops.dev/attempt"] == "2"


def test_secret_owned_by_the_job() -> None:
    secret = build_payload_secret(INV, b'{"x": 1}', "tok", "uid-123", SETTINGS)
    assert secret["metadata"]["name"] == f"eops-{INV}"
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["name"]) == ("Job", "uid-123", f"eops-{INV}")
    assert base64.b64decode(secret["data"]["payload"]) == b'{"x": 1}'
    assert base64.b64decode(secret["data"]["callback-token"]) == b"tok"
    assert secret["metadata"]["labels"]["elasticityops.dev/instance"] == "gw1"


def test_secret_too_large_names_the_payload() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_payload_secret(INV, b"x" * (1024 * 1024), "tok", "uid", SETTINGS)
    assert caught.value.problems[0].field == "payload"


def test_selector_matches_the_labels() -> None:
    labels = _job()["metadata"]["labels"]
    for term in selector("gw1").split(","):
        key, value = term.split("=")
        assert labels[key] == value


def test_function_annotations_reach_the_pod_but_cannot_allow_eviction() -> None:
    job = _job(
        annotations={"gke-gcsfuse/volumes": "true", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    )
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["gke-gcsfuse/volumes"] == "true"
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_invocation_annotations_reach_the_pod_and_override_the_functions() -> None:
    fn = spec(annotations={"eops.dev/run-seconds": "60", "gke-gcsfuse/volumes": "true"})
    inv = replace(invocation(), annotations={"eops.dev/run-seconds": "12", "eops.dev/exit-code": "3"})
    job = build_job(fn, inv, SETTINGS)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["eops.dev/run-seconds"] == "12", "the invocation's key wins over the function's"
    assert annotations["eops.dev/exit-code"] == "3"
    assert annotations["gke-gcsfuse/volumes"] == "true", "the function's other keys stay"
    assert annotations["elasticityops.dev/invocation-id"] == INV
    assert "eops.dev/run-seconds" not in job["metadata"].get("annotations", {}), "on the pod, not the Job"


def test_without_invocation_annotations_the_pod_has_the_functions() -> None:
    fn = spec(annotations={"eops.dev/run-seconds": "60"})
    annotations = build_job(fn, invocation(), SETTINGS)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["eops.dev/run-seconds"] == "60"


@pytest.mark.parametrize(
    ("types", "assigned", "expected"),
    [
        pytest.param("nvidia-l4", None, "nvidia-l4", id="one-type-no-assignment"),
        pytest.param(["nvidia-tesla-t4", "nvidia-l4"], None, "nvidia-tesla-t4", id="list-before-admission"),
        pytest.param(["nvidia-tesla-t4", "nvidia-l4"], "nvidia-tesla-t4", "nvidia-tesla-t4", id="first"),
        pytest.param(["nvidia-tesla-t4", "nvidia-l4"], "nvidia-l4", "nvidia-l4", id="spilled"),
    ],
)
def test_the_job_asks_for_the_type_the_invocation_was_admitted_on(
    types: object, assigned: str | None, expected: str
) -> None:
    inv = replace(invocation(), gpu_type=assigned)
    job = build_job(spec(gpu={"type": types}), inv, SETTINGS)
    assert _pod_spec(job)["nodeSelector"] == {"cloud.google.com/gke-accelerator": expected}
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        assert labels["elasticityops.dev/gpu-type"] == expected


def test_with_kueue_admission_the_job_names_its_queue_and_priority_and_is_made_suspended() -> None:
    """Kueue reads the queue and WorkloadPriorityClass from the Job's labels; the pod template
    carries neither (a pod with a queue name is a workload of Kueue's pod integration)."""
    kueue = replace(SETTINGS, local_queue="team-a")
    job = build_job(spec(), invocation(priority=Priority.high), kueue)
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
    assert labels["kueue.x-k8s.io/priority-class"] == "eops-high"
    assert job["spec"]["suspend"] is True
    template_labels = job["spec"]["template"]["metadata"]["labels"]
    assert not any(key.startswith("kueue.x-k8s.io/") for key in template_labels)
    assert "managedBy" not in job["spec"], "one cluster: Kueue's own Job controller runs it"
    plain = _job()
    assert "suspend" not in plain["spec"]
    assert not any(key.startswith("kueue.x-k8s.io/") for key in plain["metadata"]["labels"])


def test_on_a_multikueue_manager_the_job_is_marked_for_multikueue_by_the_gateway_itself() -> None:
    """Not left to Kueue's webhook, which skips it while its queue cache is cold (a restart)."""
    manager = replace(SETTINGS, local_queue="eops", workers="worker-1=/etc/eops/worker-1.kubeconfig")
    assert build_job(spec(), invocation(), manager)["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
