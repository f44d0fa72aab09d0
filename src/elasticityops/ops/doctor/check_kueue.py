"""Checks of the Kueue set-up a gateway with `--admission kueue` dispatches through (docs/kueue.md):
Kueue's API is served, the LocalQueue its Jobs name exists, its ClusterQueue exists, is active,
has GPU quota and selects the namespace, each AdmissionCheck that queue names is active, the
WorkloadPriorityClasses the Jobs name exist, and the identity may read the Workloads the gateway
follows.

A Job that Kueue cannot admit is not refused: it stays suspended, and its invocation waits in
the gateway with no error anywhere but Kueue's objects. These checks say which object stops it.
Without Kueue admission they say nothing."""

from __future__ import annotations

from elasticityops.ops.doctor.check_access import KUEUE_ACCESS, KUEUE_GROUP, STALE_JOB_ACCESS, grant_command
from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.snapshot import ClusterSnapshot, KueueObject, KueueReading, LabelSelector
from elasticityops.ops.kueue import KUEUE_API, KueueInputs
from elasticityops.ops.priorities import workload_priority_classes

VERSION = KUEUE_API.rpartition("/")[2]  # v1beta2, what the gateway and `eops render kueue` use
NEEDED_RESOURCES = ("workloads", "clusterqueues", "localqueues", "admissionchecks", "workloadpriorityclasses")
INSTALL = (
    "install Kueue v0.17 or later (its release manifests: kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml; on the dev "
    "cluster: eops dev-cluster up --kueue)"
)
# What to look at for each reason a ClusterQueue gives for not being active (Kueue's
# ClusterQueueActiveReason* constants).
_INACTIVE_FIX = {
    "FlavorNotFound": "create the ResourceFlavors it names (`eops render kueue` renders one per GPU type)",
    "AdmissionCheckNotFound": "create the AdmissionChecks it names (`eops render kueue` renders "
    "eops-provisioning), or render it with --provisioning-class none",
    "AdmissionCheckInactive": "make its AdmissionChecks active (see kueue-admission-checks)",
    "Terminating": "it is being deleted: apply it again once it is gone",
    "TopologyNotFound": "create the Topology its flavors name, or remove it from them",
}


_NO_STOP = """'{"spec":{"stopPolicy":"None"}}'"""
_DEFAULT_CLUSTER_QUEUE = KueueInputs("").cluster_queue


def _render(s: ClusterSnapshot, k: KueueReading, *, cluster_queue: str = "") -> str:
    queue = f" --cluster-queue {cluster_queue}" if cluster_queue not in ("", _DEFAULT_CLUSTER_QUEUE) else ""
    return (
        f"eops render kueue --namespace {s.namespace} --local-queue {k.local_queue_name}{queue} "
        "--gpu-budget TYPE=N | kubectl apply -f -"
    )


def _unreadable(s: ClusterSnapshot, section: str, check: str, what: str, grant: str) -> list[Finding]:
    return [
        Finding(
            check,
            Status.warn,
            f"could not read {what}: {s.unreadable[section]}",
            f"run the doctor as an identity that may {grant} (the gateway's own may not)",
        )
    ]


def _why_inactive(obj: KueueObject) -> str:
    if obj.active is None:
        return "Kueue has not reported it active yet (is Kueue's controller running?)"
    detail = "; ".join(part for part in (obj.active.reason, obj.active.message) if part)
    return detail or f"Active is {obj.active.status}"


def _selector_text(selector: LabelSelector) -> str:
    parts = [f"{key}={value}" for key, value in selector.match_labels.items()]
    parts += [f"{key} {op} ({','.join(values)})" for key, op, values in selector.match_expressions]
    return ", ".join(parts) or "{}"


def _is_active(obj: KueueObject) -> bool:
    return obj.active is not None and obj.active.status == "True"


def check_kueue_api(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    check = "kueue-api"
    if "kueue-api" in s.unreadable:
        return [
            Finding(
                check,
                Status.warn,
                f"could not read {KUEUE_GROUP}'s discovery: {s.unreadable['kueue-api']}",
                "check that the API server answers /apis/kueue.x-k8s.io (kubectl api-resources "
                f"--api-group={KUEUE_GROUP})",
            )
        ]
    why = "the gateway dispatches through Kueue (--admission kueue), and Kueue admits none of its Jobs"
    if not k.versions:
        return [
            Finding(
                check, Status.fail, f"Kueue is not installed: {KUEUE_GROUP} is not served; {why}", INSTALL
            )
        ]
    if VERSION not in k.versions:
        return [
            Finding(
                check,
                Status.fail,
                f"Kueue serves {KUEUE_GROUP} {', '.join(k.versions)} but not {VERSION}, which the "
                "gateway and `eops render kueue` use: this Kueue is older",
                INSTALL.replace("install", "upgrade to", 1),
            )
        ]
    missing = [name for name in NEEDED_RESOURCES if name not in k.resources]
    if missing:
        return [
            Finding(
                check,
                Status.fail,
                f"{KUEUE_GROUP}/{VERSION} does not serve {names(missing)}: Kueue's CRDs are incomplete",
                f"apply Kueue's CRDs again (kubectl get crd | grep {KUEUE_GROUP} shows which are there); "
                + INSTALL,
            )
        ]
    return [
        Finding(
            check,
            Status.passed,
            f"Kueue's API is served: {KUEUE_GROUP}/{VERSION} {', '.join(NEEDED_RESOURCES)}",
        )
    ]


def check_local_queue(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    check = "kueue-local-queue"
    where = f"LocalQueue {k.local_queue_name} in namespace {s.namespace}"
    if "kueue-local-queue" in s.unreadable:
        return _unreadable(s, "kueue-local-queue", check, f"the {where}", f"get localqueues.{KUEUE_GROUP}")
    if k.local_queue is None:
        return [
            Finding(
                check,
                Status.fail,
                f"no {where}: every Job the gateway creates names it, and Kueue leaves each suspended "
                "(its invocation waits, queued, with no error)",
                f"{_render(s, k)}; or point eops serve --kube-local-queue at an existing one "
                f"(kubectl -n {s.namespace} get localqueues)",
            )
        ]
    if k.local_queue.stopped:
        return [
            Finding(
                check,
                Status.fail,
                f"{where} is stopped (stopPolicy {k.local_queue.stopped}): Kueue admits nothing from it",
                f"kubectl -n {s.namespace} patch localqueue {k.local_queue_name} --type merge -p {_NO_STOP}",
            )
        ]
    return [Finding(check, Status.passed, f"{where} submits to ClusterQueue {k.local_queue.cluster_queue}")]


def check_cluster_queue(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    check = "kueue-cluster-queue"
    if k.local_queue is None:
        return []  # the LocalQueue's finding says so; nothing names a ClusterQueue
    name = k.local_queue.cluster_queue
    if "kueue-cluster-queue" in s.unreadable:
        return _unreadable(
            s, "kueue-cluster-queue", check, f"ClusterQueue {name}", f"get clusterqueues.{KUEUE_GROUP}"
        )
    cq = k.cluster_queue
    if cq is None:
        return [
            Finding(
                check,
                Status.fail,
                f"ClusterQueue {name}, which LocalQueue {k.local_queue_name} submits to, does not exist: "
                "Kueue admits nothing from the LocalQueue",
                f"{_render(s, k, cluster_queue=name)}; or set the LocalQueue's spec.clusterQueue to an "
                "existing one (kubectl get clusterqueues)",
            )
        ]
    if cq.stopped:
        return [
            Finding(
                check,
                Status.fail,
                f"ClusterQueue {name} is stopped (stopPolicy {cq.stopped}): Kueue admits nothing from it",
                f'kubectl patch clusterqueue {name} --type merge -p \'{{"spec":{{"stopPolicy":"None"}}}}\'',
            )
        ]
    if not _is_active(cq):
        reason = cq.active.reason if cq.active is not None else ""
        return [
            Finding(
                check,
                Status.fail,
                f"ClusterQueue {name} is not active ({_why_inactive(cq)}): Kueue admits nothing from it",
                _INACTIVE_FIX.get(reason, f"kubectl describe clusterqueue {name}"),
            )
        ]
    if not cq.gpu_quota:
        return [
            Finding(
                check,
                Status.fail,
                f"ClusterQueue {name} is active but has no nvidia.com/gpu quota: Kueue admits no Job "
                "that asks for a GPU",
                "give it a flavor per GPU type with nvidia.com/gpu quota: "
                + _render(s, k, cluster_queue=name),
            )
        ]
    selector = cq.namespace_selector
    if selector is None or not selector.matches(k.namespace_labels):
        shown = "null: it selects no namespace" if selector is None else _selector_text(selector)
        known = "" if k.namespace_labels_read else " (its labels could not be read: judged by its name label)"
        return [
            Finding(
                check,
                Status.fail,
                f"ClusterQueue {name} does not select namespace {s.namespace}{known} (namespaceSelector "
                f"{shown}): Kueue leaves the gateway's Workloads inadmissible",
                f"widen its namespaceSelector (`eops render kueue --namespace {s.namespace}` renders one "
                f"that selects it), or label the namespace to match (kubectl label namespace {s.namespace} "
                "KEY=VALUE)",
            )
        ]
    quota = ", ".join(f"{flavor} {gpus}" for flavor, gpus in sorted(cq.gpu_quota.items()))
    return [Finding(check, Status.passed, f"ClusterQueue {name} is active; GPU quota: {quota}")]


def check_admission_checks(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    check = "kueue-admission-checks"
    cq = k.cluster_queue
    if cq is None or not cq.admission_checks:
        return []
    if "kueue-admission-checks" in s.unreadable:
        return _unreadable(
            s,
            "kueue-admission-checks",
            check,
            f"ClusterQueue {cq.name}'s AdmissionChecks",
            "get admissionchecks",
        )
    findings: list[Finding] = []
    for name in cq.admission_checks:
        found = k.admission_checks.get(name)
        if found is None:
            findings.append(
                Finding(
                    check,
                    Status.fail,
                    f"AdmissionCheck {name}, which ClusterQueue {cq.name} names, does not exist: no "
                    "Workload of the queue can pass it",
                    f"{_render(s, k, cluster_queue=cq.name)} (renders eops-provisioning with its "
                    "ProvisioningRequestConfig), or drop it from the ClusterQueue's admissionChecksStrategy",
                )
            )
        elif not _is_active(found):
            findings.append(
                Finding(
                    check,
                    Status.fail,
                    f"AdmissionCheck {name} is not active ({_why_inactive(found)}): ClusterQueue "
                    f"{cq.name} admits nothing while it is not",
                    f"kubectl describe admissioncheck {name}; a ProvisioningRequest check needs its "
                    "ProvisioningRequestConfig and the autoscaler's ProvisioningRequest CRD "
                    "(provisioningrequests.autoscaling.x-k8s.io; cluster-autoscaler "
                    "--enable-provisioning-requests)",
                )
            )
    if not findings:
        findings.append(
            Finding(check, Status.passed, f"AdmissionCheck(s) {', '.join(cq.admission_checks)} active")
        )
    return findings


def check_multikueue(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    """With MultiKueue's check on the queue: is the manager's Kueue connected to each worker it
    dispatches to? A worker it is not connected to gets no work (docs/multi-cluster.md)."""
    check = "kueue-multikueue"
    if "kueue-multikueue" in s.unreadable:
        return _unreadable(
            s, "kueue-multikueue", check, "the MultiKueue config and clusters", "get multikueueclusters"
        )
    if not k.multikueue_config:
        return []
    findings: list[Finding] = []
    if not k.multikueue_clusters:
        findings.append(
            Finding(
                check,
                Status.fail,
                f"MultiKueueConfig {k.multikueue_config} names no worker cluster: nothing is dispatched",
                "name the workers in its spec.clusters (eops render kueue --multikueue W=KUBECONFIG,...)",
            )
        )
    for name, cluster in k.multikueue_clusters.items():
        if cluster is None:
            findings.append(
                Finding(
                    check,
                    Status.fail,
                    f"MultiKueueCluster {name}, which MultiKueueConfig {k.multikueue_config} names, "
                    "does not exist",
                    f"eops render kueue --multikueue {name}=KUBECONFIG,... | kubectl apply -f -",
                )
            )
        elif not _is_active(cluster):
            findings.append(
                Finding(
                    check,
                    Status.fail,
                    f"worker cluster {name} is not connected ({_why_inactive(cluster)}): Kueue sends it no "
                    "work, and the status of what runs there does not reach the manager",
                    f"check that the manager reaches {name}'s API server and that the kubeconfig in its "
                    f"Secret in kueue-system is current (kubectl describe multikueuecluster {name})",
                )
            )
    if not findings:
        workers = ", ".join(k.multikueue_clusters)
        findings.append(Finding(check, Status.passed, f"MultiKueue connected to worker cluster(s) {workers}"))
    return findings


def check_stale_job_access(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    """On a MultiKueue manager: may the gateway set a Job's pod count that Kueue v0.17.0 leaves
    stale after a worker's Kueue evicted the work (stale_jobs.py)? Without it that work can stay
    on the manager for good, its quota held, and never be dispatched again."""
    check = "kueue-stale-jobs"
    if not k.multikueue_config or "access" in s.unreadable:
        return []  # one cluster never needs it; the permissions check says why nothing was reviewed
    reviewed = [rule for rule in s.access if rule.label in {r.label for r in STALE_JOB_ACCESS}]
    if not reviewed:
        return []  # a snapshot gathered without Kueue admission
    missing = [rule for rule in reviewed if not rule.allowed]
    who = f" for {s.identity}" if s.identity else ""
    if missing:
        return [
            Finding(
                check,
                Status.warn,
                f"ElasticityOps cannot {names([r.label for r in missing])} in namespace {s.namespace}{who}: "
                "after a worker's Kueue evicts the work (a region out of GPUs, waitForPodsReady), "
                "Kueue v0.17.0 can leave the manager's Job counting a pod that is gone, and that "
                "work is then never dispatched again; the gateway sets the count right only with "
                'this right (docs/multi-cluster.md, "A region out of GPUs")',
                grant_command(missing, s.namespace),
            )
        ]
    return [
        Finding(
            check,
            Status.passed,
            f"may {names([r.label for r in reviewed])} in {s.namespace}{who} (a pod count MultiKueue "
            "leaves stale after an eviction in a worker)",
        )
    ]


def check_workload_priorities(s: ClusterSnapshot, k: KueueReading) -> list[Finding]:
    check = "kueue-priorities"
    if "kueue-priorities" in s.unreadable:
        return _unreadable(
            s, "kueue-priorities", check, "WorkloadPriorityClasses", "list workloadpriorityclasses"
        )
    wanted = {m["metadata"]["name"]: int(m["value"]) for m in workload_priority_classes()}
    present = {pc.name: pc.value for pc in k.priority_classes}
    missing = [name for name in wanted if name not in present]
    findings: list[Finding] = []
    if missing:
        findings.append(
            Finding(
                check,
                Status.fail,
                f"WorkloadPriorityClass(es) missing: {', '.join(missing)}: Kueue makes no Workload for a "
                "Job that names a missing one, so that Job stays suspended",
                _render(s, k) + " (renders them)",
            )
        )
    differ = [
        f"{name} is {present[name]}, expected {value}"
        for name, value in wanted.items()
        if name in present and present[name] != value
    ]
    if differ:
        findings.append(
            Finding(
                check,
                Status.warn,
                "WorkloadPriorityClass values differ from the gateway's priority levels "
                f"({'; '.join(differ)}): Kueue orders and preempts by them",
                "kubectl delete workloadpriorityclass NAME, then apply `eops render kueue` again",
            )
        )
    if not findings:
        findings.append(Finding(check, Status.passed, f"WorkloadPriorityClasses {', '.join(wanted)} present"))
    return findings


def check_kueue_access(s: ClusterSnapshot) -> list[Finding]:
    check = "kueue-access"
    if "access" in s.unreadable:
        return []  # the permissions check says why nothing was reviewed
    reviewed = [rule for rule in s.access if rule.group == KUEUE_GROUP]
    if not reviewed:
        return [
            Finding(
                check,
                Status.warn,
                "the rights to read Workloads were not reviewed",
                "run doctor with --admission kueue",
            )
        ]
    missing = [rule for rule in reviewed if not rule.allowed]
    who = f" for {s.identity}" if s.identity else ""
    if missing:
        why = []
        if any(not r.subresource for r in missing):
            why.append(
                "it follows each Job's Workload for its timeline, queue position and Kueue's preemptions"
            )
        if any(r.subresource for r in missing):
            why.append(
                "with --kube-nominate-wait it writes each Workload's nominated workers, and "
                "MultiKueue dispatches nothing until it does"
            )
        return [
            Finding(
                check,
                Status.fail,
                f"ElasticityOps cannot {names([r.label for r in missing])} in namespace {s.namespace}{who}: "
                + "; ".join(why),
                grant_command(missing, s.namespace),
            )
        ]
    labels = ", ".join(rule.verb for rule in KUEUE_ACCESS)
    nominates = (
        " and patch workloads/status (to nominate workers)" if any(r.subresource for r in reviewed) else ""
    )
    return [
        Finding(
            check, Status.passed, f"may {labels} workloads.{KUEUE_GROUP}{nominates} in {s.namespace}{who}"
        )
    ]


def check_kueue(s: ClusterSnapshot) -> list[Finding]:
    """Every Kueue finding, in the order Kueue needs the objects; none without Kueue admission."""
    k = s.kueue
    if k is None:
        return []
    findings = check_kueue_api(s, k)
    if findings[0].status is not Status.passed:
        return findings + check_kueue_access(s)  # no queue can be there to check
    for part in (
        check_local_queue,
        check_cluster_queue,
        check_admission_checks,
        check_multikueue,
        check_stale_job_access,
        check_workload_priorities,
    ):
        findings.extend(part(s, k))
    return findings + check_kueue_access(s)
