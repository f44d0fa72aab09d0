"""The doctor's Kueue checks (`--admission kueue`) over hand-built snapshots: each fault between the
gateway's Jobs and their admission is named, with its fix; a healthy set-up passes; without Kueue
admission there is no Kueue finding. Table-driven: one row per fault."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from elasticityops.ops.doctor.check_access import KUEUE_ACCESS, NOMINATE_ACCESS, STALE_JOB_ACCESS
from elasticityops.ops.doctor.checks import REQUIRED_ACCESS, Status, exit_code, required_access, run_checks
from elasticityops.ops.doctor.options import GatherOptions
from elasticityops.ops.doctor.snapshot import (
    ClusterSnapshot,
    Condition,
    KueueObject,
    KueueReading,
    LabelSelector,
    PriorityClassInfo,
)
from elasticityops.ops.priorities import workload_priority_classes

from .test_doctor_checks import healthy

ACTIVE = Condition("Active", "True", "Ready", "Can admit new workloads")
RESOURCES = (
    "workloads",
    "workloads/status",
    "clusterqueues",
    "localqueues",
    "admissionchecks",
    "workloadpriorityclasses",
)


def kueue_healthy() -> ClusterSnapshot:
    base = healthy()
    return replace(
        base,
        access=(*base.access, *(replace(rule, allowed=True) for rule in KUEUE_ACCESS)),
        kueue=KueueReading(
            local_queue_name="eops",
            versions=("v1beta2", "v1beta1"),
            resources=RESOURCES,
            local_queue=KueueObject("eops", ACTIVE, cluster_queue="team-a"),
            cluster_queue=KueueObject(
                "team-a",
                ACTIVE,
                admission_checks=("eops-provisioning",),
                gpu_quota={"nvidia-tesla-t4": "3"},
            ),
            admission_checks={"eops-provisioning": KueueObject("eops-provisioning", ACTIVE)},
            priority_classes=tuple(
                PriorityClassInfo(m["metadata"]["name"], int(m["value"])) for m in workload_priority_classes()
            ),
            namespace_labels={NAME_LABEL: "eops", "team": "a"},
        ),
    )


NAME_LABEL = "kubernetes.io/metadata.name"
Mutation = Callable[[KueueReading], KueueReading]


def inactive(reason: str, message: str) -> Condition:
    return Condition("Active", "False", reason, message)


def cluster_queue(k: KueueReading, **changes: object) -> KueueReading:
    assert k.cluster_queue is not None
    return replace(k, cluster_queue=replace(k.cluster_queue, **changes))  # type: ignore[arg-type]


CASES: list[tuple[str, Mutation, str, Status, str, str]] = [
    # (id, break it, check, status, in message, in fix)
    (
        "not-installed",
        lambda k: replace(k, versions=(), resources=()),
        "kueue-api",
        Status.fail,
        "Kueue is not installed",
        "eops dev-cluster up --kueue",
    ),
    (
        "old-kueue",
        lambda k: replace(k, versions=("v1beta1",), resources=()),
        "kueue-api",
        Status.fail,
        "not v1beta2",
        "upgrade to Kueue v0.17",
    ),
    (
        "crd-missing",
        lambda k: replace(k, resources=tuple(r for r in RESOURCES if r != "workloads")),
        "kueue-api",
        Status.fail,
        "does not serve workloads",
        "apply Kueue's CRDs again",
    ),
    (
        "no-local-queue",
        lambda k: replace(k, local_queue=None, cluster_queue=None, admission_checks={}),
        "kueue-local-queue",
        Status.fail,
        "no LocalQueue eops in namespace eops",
        "eops render kueue --namespace eops --local-queue eops",
    ),
    (
        "no-cluster-queue",
        lambda k: replace(k, cluster_queue=None, admission_checks={}),
        "kueue-cluster-queue",
        Status.fail,
        "ClusterQueue team-a, which LocalQueue eops submits to, does not exist",
        "--cluster-queue team-a",
    ),
    (
        "flavor-missing",
        lambda k: cluster_queue(
            k,
            active=inactive(
                "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s)"
            ),
        ),
        "kueue-cluster-queue",
        Status.fail,
        "not active (FlavorNotFound; Can't admit new workloads: references missing ResourceFlavor(s))",
        "ResourceFlavors",
    ),
    (
        "check-missing-reason",
        lambda k: cluster_queue(
            k, active=inactive("AdmissionCheckNotFound", "references missing AdmissionCheck(s)")
        ),
        "kueue-cluster-queue",
        Status.fail,
        "AdmissionCheckNotFound",
        "--provisioning-class none",
    ),
    (
        "not-reconciled",
        lambda k: cluster_queue(k, active=None),
        "kueue-cluster-queue",
        Status.fail,
        "is Kueue's controller running?",
        "kubectl describe clusterqueue team-a",
    ),
    (
        "stopped",
        lambda k: cluster_queue(k, stopped="HoldAndDrain"),
        "kueue-cluster-queue",
        Status.fail,
        "stopPolicy HoldAndDrain",
        '"stopPolicy":"None"',
    ),
    (
        "no-gpu-quota",
        lambda k: cluster_queue(k, gpu_quota={}),
        "kueue-cluster-queue",
        Status.fail,
        "no nvidia.com/gpu quota",
        "eops render kueue",
    ),
    (
        "local-queue-stopped",
        lambda k: replace(k, local_queue=replace(k.local_queue, stopped="Hold")) if k.local_queue else k,
        "kueue-local-queue",
        Status.fail,
        "LocalQueue eops in namespace eops is stopped (stopPolicy Hold)",
        "kubectl -n eops patch localqueue eops",
    ),
    (
        "other-namespace",
        lambda k: cluster_queue(k, namespace_selector=LabelSelector({NAME_LABEL: "team-b"})),
        "kueue-cluster-queue",
        Status.fail,
        "does not select namespace eops (namespaceSelector kubernetes.io/metadata.name=team-b)",
        "eops render kueue --namespace eops",
    ),
    (
        "null-selector",
        lambda k: cluster_queue(k, namespace_selector=None),
        "kueue-cluster-queue",
        Status.fail,
        "null: it selects no namespace",
        "widen its namespaceSelector",
    ),
    (
        "selector-judged-by-name",
        lambda k: replace(
            cluster_queue(k, namespace_selector=LabelSelector({"team": "a"})),
            namespace_labels={NAME_LABEL: "eops"},
            namespace_labels_read=False,
        ),
        "kueue-cluster-queue",
        Status.fail,
        "its labels could not be read: judged by its name label",
        "kubectl label namespace eops",
    ),
    (
        "admission-check-missing",
        lambda k: replace(k, admission_checks={"eops-provisioning": None}),
        "kueue-admission-checks",
        Status.fail,
        "AdmissionCheck eops-provisioning, which ClusterQueue team-a names, does not exist",
        "ProvisioningRequestConfig",
    ),
    (
        "admission-check-inactive",
        lambda k: replace(
            k,
            admission_checks={
                "eops-provisioning": KueueObject(
                    "eops-provisioning", inactive("BadParametersRef", "missing ProvisioningRequestConfig")
                )
            },
        ),
        "kueue-admission-checks",
        Status.fail,
        "not active (BadParametersRef; missing ProvisioningRequestConfig)",
        "kubectl describe admissioncheck eops-provisioning",
    ),
    (
        "priority-missing",
        lambda k: replace(k, priority_classes=tuple(p for p in k.priority_classes if p.name != "eops-high")),
        "kueue-priorities",
        Status.fail,
        "missing: eops-high",
        "eops render kueue",
    ),
    (
        "priority-value",
        lambda k: replace(k, priority_classes=tuple(replace(p, value=1) for p in k.priority_classes)),
        "kueue-priorities",
        Status.warn,
        "eops-high is 1, expected 300",
        "kubectl delete workloadpriorityclass",
    ),
    (
        "multikueue-worker-lost",
        lambda k: multikueue(
            k, {"worker-1": inactive("ClientConnectionFailed", "dial tcp 10.0.0.7:443: connection refused")}
        ),
        "kueue-multikueue",
        Status.fail,
        "worker cluster worker-1 is not connected (ClientConnectionFailed; dial tcp",
        "kubectl describe multikueuecluster worker-1",
    ),
    (
        "multikueue-worker-missing",
        lambda k: replace(multikueue(k, {}), multikueue_clusters={"worker-2": None}),
        "kueue-multikueue",
        Status.fail,
        "MultiKueueCluster worker-2, which MultiKueueConfig eops names, does not exist",
        "eops render kueue --multikueue worker-2=KUBECONFIG",
    ),
    (
        "multikueue-no-workers",
        lambda k: multikueue(k, {}),
        "kueue-multikueue",
        Status.fail,
        "names no worker cluster",
        "spec.clusters",
    ),
]


def multikueue(k: KueueReading, inactive_workers: dict[str, Condition]) -> KueueReading:
    """`k` as a MultiKueue manager's queue whose workers are worker-1 and worker-2 (connected
    unless `inactive_workers` says otherwise), or none when `inactive_workers` is empty and
    no worker is connected."""
    workers: dict[str, KueueObject | None] = {
        name: KueueObject(name, inactive_workers.get(name, ACTIVE))
        for name in (("worker-1", "worker-2") if inactive_workers else ())
    }
    check = KueueObject("eops-multikueue", ACTIVE, controller="kueue.x-k8s.io/multikueue", parameters="eops")
    return replace(
        cluster_queue(k, admission_checks=("eops-multikueue",)),
        admission_checks={"eops-multikueue": check},
        multikueue_config="eops",
        multikueue_clusters=workers,
    )


def test_the_stale_job_right_is_named_on_a_multikueue_manager_only() -> None:
    """The gateway on MultiKueue's manager sets a Job's pod count Kueue v0.17.0 leaves stale
    after an eviction in a worker (stale_jobs.py): without `patch jobs/status` that work can be
    stuck for good, a warning with the grant; one cluster never needs it, so no finding, and
    the general permissions check never counts it."""
    assert [r.label for r in STALE_JOB_ACCESS] == ["patch jobs.batch/status"]
    assert set(STALE_JOB_ACCESS) <= set(required_access("job", kueue=True))
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    manager = multikueue(snapshot.kueue, {})
    denied = replace(snapshot, access=(*snapshot.access, *STALE_JOB_ACCESS))
    granted = tuple(replace(r, allowed=True) for r in STALE_JOB_ACCESS)
    allowed = replace(snapshot, access=(*snapshot.access, *granted))

    [finding] = [f for f in run_checks(replace(denied, kueue=manager)) if f.check == "kueue-stale-jobs"]
    assert finding.status is Status.warn
    assert "cannot patch jobs.batch/status in namespace" in finding.message
    assert "never dispatched again" in finding.message
    assert "--verb=patch --resource=jobs.batch/status" in finding.fix
    [passed] = [f for f in run_checks(replace(allowed, kueue=manager)) if f.check == "kueue-stale-jobs"]
    assert passed.status is Status.passed
    assert "may patch jobs.batch/status" in passed.message

    one_cluster = run_checks(denied)
    assert "kueue-stale-jobs" not in [f.check for f in one_cluster]
    [general] = [f for f in one_cluster if f.check == "permissions"]
    assert general.status is Status.passed, general.message
    assert exit_code(one_cluster) == 0


def test_a_multikueue_manager_connected_to_its_workers_passes() -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    findings = run_checks(replace(snapshot, kueue=multikueue(snapshot.kueue, {"worker-9": ACTIVE})))
    [found] = [f for f in findings if f.check == "kueue-multikueue"]
    assert found.status is Status.passed
    assert found.message == "MultiKueue connected to worker cluster(s) worker-1, worker-2"


@pytest.mark.parametrize(
    ("name", "mutate", "check", "status", "in_message", "in_fix"), CASES, ids=[c[0] for c in CASES]
)
def test_each_kueue_fault_is_named_with_its_fix(
    name: str, mutate: Mutation, check: str, status: Status, in_message: str, in_fix: str
) -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    findings = run_checks(replace(snapshot, kueue=mutate(snapshot.kueue)))
    matching = [f for f in findings if f.check == check and f.status is status and in_message in f.message]
    seen = [(f.check, f.status.value, f.message) for f in findings]
    assert matching, f"{name}: no {status.value} {check} finding with {in_message!r} in {seen}"
    assert in_fix in matching[0].fix, matching[0].fix
    assert exit_code(findings) == (1 if status is Status.fail else 0)


def test_a_healthy_kueue_set_up_passes_every_kueue_check() -> None:
    findings = run_checks(kueue_healthy())
    kueue = [(f.check, f.status) for f in findings if f.check.startswith("kueue")]
    assert kueue == [
        ("kueue-api", Status.passed),
        ("kueue-local-queue", Status.passed),
        ("kueue-cluster-queue", Status.passed),
        ("kueue-admission-checks", Status.passed),
        ("kueue-priorities", Status.passed),
        ("kueue-access", Status.passed),
    ]
    assert exit_code(findings) == 0
    cq = next(f for f in findings if f.check == "kueue-cluster-queue")
    assert "GPU quota: nvidia-tesla-t4 3" in cq.message


def test_without_kueue_admission_there_is_no_kueue_finding() -> None:
    assert not [f for f in run_checks(healthy()) if f.check.startswith("kueue")]


def test_not_installed_skips_the_queue_checks_but_still_reviews_access() -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    findings = run_checks(replace(snapshot, kueue=replace(snapshot.kueue, versions=())))
    assert [f.check for f in findings if f.check.startswith("kueue")] == ["kueue-api", "kueue-access"]


def test_a_queue_missing_stops_the_checks_of_what_it_would_name() -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    broken = replace(snapshot.kueue, local_queue=None, cluster_queue=None, admission_checks={})
    checks = [f.check for f in run_checks(replace(snapshot, kueue=broken))]
    assert "kueue-cluster-queue" not in checks
    assert "kueue-admission-checks" not in checks


def test_no_admission_check_named_is_no_finding() -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    plain = cluster_queue(snapshot.kueue, admission_checks=())
    findings = run_checks(replace(snapshot, kueue=replace(plain, admission_checks={})))
    assert "kueue-admission-checks" not in [f.check for f in findings]


def test_reading_workloads_denied_is_a_kueue_fault_with_the_grant() -> None:
    snapshot = kueue_healthy()
    denied = tuple(replace(r, allowed=r.group != "kueue.x-k8s.io") for r in snapshot.access)
    findings = run_checks(
        replace(snapshot, access=denied, identity="system:serviceaccount:eops:elasticityops")
    )
    [finding] = [f for f in findings if f.check == "kueue-access"]
    assert finding.status is Status.fail
    assert "cannot get workloads.kueue.x-k8s.io, list workloads.kueue.x-k8s.io" in finding.message
    assert "--verb=get,list,watch --resource=workloads.kueue.x-k8s.io" in finding.fix
    # The general permissions check is about the rest, and passes.
    [general] = [f for f in findings if f.check == "permissions"]
    assert general.status is Status.passed


def test_the_nomination_right_is_reviewed_only_for_a_nominating_gateway_and_named_when_denied() -> None:
    assert not set(NOMINATE_ACCESS) & set(required_access("job", kueue=True))
    asked = required_access("job", kueue=True, nominate=True)
    assert [r.label for r in asked if r.group == "kueue.x-k8s.io" and r.subresource] == [
        "patch workloads.kueue.x-k8s.io/status"
    ]
    assert not [r for r in required_access("job", kueue=False, nominate=True) if r.group == "kueue.x-k8s.io"]

    snapshot = kueue_healthy()
    allowed = replace(
        snapshot, access=(*snapshot.access, *(replace(r, allowed=True) for r in NOMINATE_ACCESS))
    )
    [passed] = [f for f in run_checks(allowed) if f.check == "kueue-access"]
    assert passed.status is Status.passed
    assert "and patch workloads/status (to nominate workers)" in passed.message
    denied = replace(snapshot, access=(*snapshot.access, *NOMINATE_ACCESS))
    [finding] = [f for f in run_checks(denied) if f.check == "kueue-access"]
    assert finding.status is Status.fail
    assert "cannot patch workloads.kueue.x-k8s.io/status" in finding.message
    assert "MultiKueue dispatches nothing until it does" in finding.message
    assert "Workload for its timeline" not in finding.message, "reading Workloads is allowed"
    assert "--verb=patch --resource=workloads.kueue.x-k8s.io/status" in finding.fix


@pytest.mark.parametrize(
    ("section", "check"),
    [
        ("kueue-api", "kueue-api"),
        ("kueue-local-queue", "kueue-local-queue"),
        ("kueue-cluster-queue", "kueue-cluster-queue"),
        ("kueue-admission-checks", "kueue-admission-checks"),
        ("kueue-priorities", "kueue-priorities"),
        ("kueue-multikueue", "kueue-multikueue"),
    ],
)
def test_an_unreadable_kueue_object_is_a_warning_naming_the_error(section: str, check: str) -> None:
    snapshot = kueue_healthy()
    findings = run_checks(replace(snapshot, unreadable={section: "403 Forbidden: forbidden"}))
    [finding] = [f for f in findings if f.check == check]
    assert finding.status is Status.warn
    assert "403 Forbidden" in finding.message


def test_the_kueue_rights_are_reviewed_only_with_kueue_admission() -> None:
    assert required_access("job") == REQUIRED_ACCESS
    assert {(r.verb, r.resource, r.group) for r in required_access("job", kueue=True)} - {
        (r.verb, r.resource, r.group) for r in REQUIRED_ACCESS
    } == {
        ("get", "workloads", "kueue.x-k8s.io"),
        ("list", "workloads", "kueue.x-k8s.io"),
        ("watch", "workloads", "kueue.x-k8s.io"),
        ("patch", "jobs", "batch"),  # reported only on a MultiKueue manager: test below
    }


@pytest.mark.parametrize(
    ("selector", "selects"),
    [
        (LabelSelector(), True),
        (LabelSelector({"team": "a"}), True),
        (LabelSelector({"team": "b"}), False),
        (LabelSelector(match_expressions=(("team", "In", ("a", "b")),)), True),
        (LabelSelector(match_expressions=(("team", "NotIn", ("a",)),)), False),
        (LabelSelector(match_expressions=(("tier", "Exists", ()),)), False),
        (LabelSelector(match_expressions=(("tier", "DoesNotExist", ()),)), True),
        (LabelSelector({NAME_LABEL: "eops"}, (("team", "Exists", ()),)), True),
    ],
)
def test_a_cluster_queue_selecting_the_namespace_passes(selector: LabelSelector, selects: bool) -> None:
    snapshot = kueue_healthy()
    assert snapshot.kueue is not None
    findings = run_checks(replace(snapshot, kueue=cluster_queue(snapshot.kueue, namespace_selector=selector)))
    [finding] = [f for f in findings if f.check == "kueue-cluster-queue"]
    assert finding.status is (Status.passed if selects else Status.fail), finding.message


@pytest.mark.parametrize(
    ("options", "queue"),
    [
        (GatherOptions(), None),
        (GatherOptions(admission="kueue"), "eops"),
        (GatherOptions(admission="kueue", local_queue="team-a"), "team-a"),
        (GatherOptions(local_queue="team-a"), "team-a"),
    ],
)
def test_the_queue_checked_is_the_one_serve_would_submit_to(
    options: GatherOptions, queue: str | None
) -> None:
    assert options.kueue_queue == queue
