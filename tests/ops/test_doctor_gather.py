"""`gather`, the doctor's only I/O, against a real HTTP server that plays a half-broken cluster:
what it reads through the backend's client, which requests it sends, and that every failure
(403, 404, a dropped connection, an unusable kubeconfig) becomes an unreadable section or an
`api_error` in the domain's words, never an exception of an HTTP library."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import unquote

import yaml

from backends.kubernetes.scripted_server import Reply, scripted_in_thread
from elasticityops.ops.doctor.checks import REQUIRED_ACCESS
from elasticityops.ops.doctor.gather import GatherOptions, gather

PLUGIN_LABELS = {"name": "nvidia-device-plugin-ds"}
NODE = {
    "metadata": {"name": "gpu-1", "labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}},
    "status": {
        "capacity": {"nvidia.com/gpu": "1"},
        "allocatable": {"nvidia.com/gpu": "1"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
PLUGIN = {
    "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
    "spec": {"selector": {"matchLabels": PLUGIN_LABELS}},
    "status": {"desiredNumberScheduled": 1, "numberReady": 1},
}
PENDING = {
    "metadata": {"name": "inv-1", "namespace": "gpu"},
    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    "status": {"phase": "Pending"},
}
EVENT = {
    "involvedObject": {"kind": "Pod", "name": "inv-1"},
    "reason": "FailedScheduling",
    "message": "0/1 nodes are available",
}


def _list(*items: object) -> Reply:
    return Reply(200, {"items": list(items), "metadata": {"resourceVersion": "1"}})


def _forbidden(what: str) -> Reply:
    return Reply(403, {"kind": "Status", "reason": "Forbidden", "message": f"{what} is forbidden"})


ROUTES = {
    r"^GET /version$": [Reply(200, {"gitVersion": "v1.36.3"})],
    r"^POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews$": [
        Reply(201, {"status": {"allowed": True}})
    ],
    r"^POST /apis/authentication.k8s.io/v1/selfsubjectreviews$": [
        Reply(201, {"status": {"userInfo": {"username": "alice"}}})
    ],
    r"^GET /api/v1/nodes\?": [_list(NODE)],
    r"^GET /apis/apps/v1/daemonsets\?": [_list(PLUGIN)],
    r"^GET /api/v1/namespaces/kube-system/pods\?labelSelector=name=nvidia-device-plugin-ds&": [
        _list({"metadata": {"name": "plugin-abc"}, "spec": {"nodeName": "gpu-1"}})
    ],
    r"^GET /api/v1/namespaces/kube-system/pods/plugin-abc/log\?tailLines=200$": [
        Reply(200, raw=b"Loading NVML\nFailed to initialize NVML: could not load NVML library\n")
    ],
    r"^GET /apis/apiregistration.k8s.io/v1/apiservices\?": [_forbidden("apiservices")],
    r"^GET /apis/autoscaling/v2/horizontalpodautoscalers\?": [Reply(drop=True)],
    r"^GET /apis/scheduling.k8s.io/v1/priorityclasses\?": [_list()],
    r"^GET /api/v1/namespaces/gpu/pods\?fieldSelector=status.phase=Pending&": [_list(PENDING)],
    r"^GET /api/v1/namespaces/gpu/events\?fieldSelector=involvedObject.kind=Pod&": [_list(EVENT)],
    r"^GET /api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status$": [
        Reply(404, {"kind": "Status", "reason": "NotFound", "message": "configmaps not found"})
    ],
    r"^GET /apis/coordination.k8s.io/v1/namespaces/gpu/leases/elasticityops$": [
        Reply(
            200,
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "elasticityops", "namespace": "gpu", "resourceVersion": "7"},
                "spec": {
                    "holderIdentity": "gw-0",
                    "leaseDurationSeconds": 15,
                    "renewTime": "2026-01-01T00:00:00.000000Z",
                    "leaseTransitions": 3,
                },
            },
        )
    ],
}


def _kubeconfig(path: Path, server: str, ca: str | None = None) -> Path:
    cluster = {"server": server, **({"certificate-authority": ca} if ca else {})}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "sesame"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "gpu"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def test_gather_reads_a_half_broken_cluster_section_by_section(tmp_path: Path) -> None:
    with scripted_in_thread([], {k: list(v) for k, v in ROUTES.items()}) as srv:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", srv.url)
        options = GatherOptions(kubeconfig=kubeconfig, namespace="gpu", timeout_s=5)
        snap = asyncio.run(gather(options))
    assert snap.api_reachable, snap.api_error
    assert (snap.server_version, snap.namespace, snap.identity) == ("v1.36.3", "gpu", "alice")
    assert len(snap.access) == len(REQUIRED_ACCESS)
    assert all(rule.allowed for rule in snap.access)
    assert [(n.name, n.gpu_allocatable) for n in snap.nodes] == [("gpu-1", 1)]
    assert [(d.name, d.ready) for d in snap.device_plugins] == [("nvidia-device-plugin-daemonset", 1)]
    [log] = snap.device_plugin_logs
    assert (log.pod, log.node) == ("plugin-abc", "gpu-1")
    assert "Failed to initialize NVML" in log.text
    [pod] = snap.pending_pods
    assert (pod.name, pod.gpu_request) == ("inv-1", 1)
    assert [e.reason for e in pod.events] == ["FailedScheduling"]
    assert snap.priority_classes == ()
    assert snap.lease is not None
    assert (snap.lease.holder, snap.lease.duration_s, snap.lease.transitions) == ("gw-0", 15, 3)
    assert snap.lease.renewed_ago_s is not None
    assert snap.lease.renewed_ago_s > 86_400  # renewed long ago, by this machine's clock
    # Each failure is its own section's, in the client's words, and the others were still read.
    assert set(snap.unreadable) == {"apiservices", "hpas", "autoscaler-status"}
    assert "403 Forbidden apiservices is forbidden" in snap.unreadable["apiservices"]
    assert "GET /apis/autoscaling/v2/horizontalpodautoscalers: ServerDisconnected" in snap.unreadable["hpas"]
    assert "404 NotFound" in snap.unreadable["autoscaler-status"]
    # Every request carried the kubeconfig's token; the access reviews asked about namespace gpu
    # for the namespaced rules and about no namespace for the cluster-wide ones.
    assert {s.headers.get("authorization") for s in srv.seen} == {"Bearer sesame"}
    reviews = [json.loads(s.body) for s in srv.seen if s.target.endswith("selfsubjectaccessreviews")]
    attributes = [r["spec"]["resourceAttributes"] for r in reviews]
    asked = {(a["verb"], a["resource"]): a.get("namespace") for a in attributes}
    wanted = {(rule.verb, rule.resource): "gpu" if rule.namespaced else None for rule in REQUIRED_ACCESS}
    assert asked == wanted
    assert all(r["kind"] == "SelfSubjectAccessReview" for r in reviews)
    # Namespaced kinds were listed across all namespaces where the doctor means all of them.
    assert any(unquote(s.target).startswith("/apis/apps/v1/daemonsets?") for s in srv.seen)


def test_an_unreachable_api_server_is_an_api_error(tmp_path: Path) -> None:
    with scripted_in_thread([]) as srv:
        url = srv.url
    options = GatherOptions(kubeconfig=_kubeconfig(tmp_path / "kubeconfig", url), timeout_s=2)
    snap = asyncio.run(gather(options))
    assert not snap.api_reachable
    assert snap.api_error.startswith("GET /version: ClientConnectorError")
    # Where `eops serve` runs Jobs, not the context's namespace ("gpu"), which the gateway ignores.
    assert snap.namespace == "elasticityops"


def test_an_unusable_kubeconfig_is_an_api_error_naming_it(tmp_path: Path) -> None:
    missing_ca = str(tmp_path / "no-such-ca.crt")
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1", ca=missing_ca)
    snap = asyncio.run(gather(GatherOptions(kubeconfig=kubeconfig)))
    assert not snap.api_reachable
    assert snap.api_error.startswith("kubeconfig: cannot use the Kubernetes configuration")
    assert "certificate or key file" in snap.api_error


KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
KUEUE_ROUTES = {
    r"^GET /apis/kueue.x-k8s.io$": [
        Reply(
            200,
            {
                "kind": "APIGroup",
                "versions": [{"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"}],
            },
        )
    ],
    rf"^GET {KUEUE}$": [
        Reply(
            200,
            {
                "kind": "APIResourceList",
                "resources": [{"name": "workloads"}, {"name": "workloads/status"}, {"name": "clusterqueues"}],
            },
        )
    ],
    rf"^GET {KUEUE}/namespaces/gpu/localqueues/team-a$": [
        Reply(
            200,
            {
                "metadata": {"name": "team-a", "namespace": "gpu"},
                "spec": {"clusterQueue": "gpus"},
                "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]},
            },
        )
    ],
    rf"^GET {KUEUE}/clusterqueues/gpus$": [
        Reply(
            200,
            {
                "metadata": {"name": "gpus"},
                "spec": {
                    "stopPolicy": "None",
                    "admissionChecksStrategy": {
                        "admissionChecks": [{"name": "eops-provisioning"}, {"name": "gone"}]
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu", "cpu"],
                            "flavors": [
                                {
                                    "name": "nvidia-tesla-t4",
                                    "resources": [
                                        {"name": "nvidia.com/gpu", "nominalQuota": 3},
                                        {"name": "cpu", "nominalQuota": 12},
                                    ],
                                }
                            ],
                        }
                    ],
                },
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "False",
                            "reason": "AdmissionCheckNotFound",
                            "message": "references missing AdmissionCheck(s): [gone].",
                        }
                    ]
                },
            },
        )
    ],
    rf"^GET {KUEUE}/admissionchecks/eops-provisioning$": [
        Reply(
            200,
            {
                "metadata": {"name": "eops-provisioning"},
                "status": {"conditions": [{"type": "Active", "status": "True"}]},
            },
        )
    ],
    rf"^GET {KUEUE}/admissionchecks/gone$": [
        Reply(404, {"kind": "Status", "reason": "NotFound", "message": "admissionchecks gone not found"})
    ],
    rf"^GET {KUEUE}/workloadpriorityclasses\?": [_forbidden("workloadpriorityclasses")],
    r"^GET /api/v1/namespaces/gpu$": [
        Reply(
            200, {"metadata": {"name": "gpu", "labels": {"kubernetes.io/metadata.name": "gpu", "team": "a"}}}
        )
    ],
}


def test_gather_reads_kueue_from_the_local_queue_down(tmp_path: Path) -> None:
    routes = {k: list(v) for k, v in {**KUEUE_ROUTES, **ROUTES}.items()}
    with scripted_in_thread([], routes) as srv:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", srv.url)
        options = GatherOptions(kubeconfig=kubeconfig, namespace="gpu", local_queue="team-a", timeout_s=5)
        snap = asyncio.run(gather(options))
    k = snap.kueue
    assert k is not None
    assert (k.versions, k.resources) == (("v1beta2",), ("workloads", "clusterqueues"))
    assert k.local_queue is not None
    assert (k.local_queue.name, k.local_queue.cluster_queue) == ("team-a", "gpus")
    assert k.cluster_queue is not None
    assert k.cluster_queue.admission_checks == ("eops-provisioning", "gone")
    assert k.cluster_queue.gpu_quota == {"nvidia-tesla-t4": "3"}
    assert k.cluster_queue.stopped == ""
    assert k.cluster_queue.namespace_selector is None  # none given: Kueue's null, no namespace
    assert (k.namespace_labels, k.namespace_labels_read) == (
        {"kubernetes.io/metadata.name": "gpu", "team": "a"},
        True,
    )
    assert k.cluster_queue.active is not None
    assert k.cluster_queue.active.reason == "AdmissionCheckNotFound"
    checks = k.admission_checks
    assert checks["gone"] is None
    assert checks["eops-provisioning"] is not None
    assert checks["eops-provisioning"].active is not None
    # A Kueue object not there is absent, one not readable is a section's error.
    assert "403 Forbidden workloadpriorityclasses is forbidden" in snap.unreadable["kueue-priorities"]
    assert "kueue-admission-checks" not in snap.unreadable
    # The rights to read Workloads were reviewed in the namespace, beside the rest.
    reviews = [
        json.loads(s.body)["spec"]["resourceAttributes"]
        for s in srv.seen
        if s.target.endswith("accessreviews")
    ]
    kueue = {(a["verb"], a["resource"], a["namespace"]) for a in reviews if a["group"] == "kueue.x-k8s.io"}
    assert kueue == {("get", "workloads", "gpu"), ("list", "workloads", "gpu"), ("watch", "workloads", "gpu")}


def test_gather_without_kueue_admission_asks_kueue_nothing(tmp_path: Path) -> None:
    with scripted_in_thread([], {k: list(v) for k, v in ROUTES.items()}) as srv:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", srv.url)
        snap = asyncio.run(gather(GatherOptions(kubeconfig=kubeconfig, namespace="gpu", timeout_s=5)))
    assert snap.kueue is None
    assert not [s for s in srv.seen if "kueue" in s.target or b"kueue" in s.body]


def test_gather_finds_kueue_not_installed(tmp_path: Path) -> None:
    gone = {
        r"^GET /apis/kueue.x-k8s.io$": [
            Reply(404, {"kind": "Status", "reason": "NotFound", "message": "404"})
        ]
    }
    with scripted_in_thread([], {k: list(v) for k, v in {**gone, **ROUTES}.items()}) as srv:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", srv.url)
        snap = asyncio.run(gather(GatherOptions(kubeconfig=kubeconfig, namespace="gpu", admission="kueue")))
    assert snap.kueue is not None
    assert (snap.kueue.local_queue_name, snap.kueue.versions, snap.kueue.local_queue) == ("eops", (), None)
    assert "kueue-api" not in snap.unreadable
