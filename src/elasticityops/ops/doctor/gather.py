"""The doctor's only I/O: read the cluster (the backend's client, api.py; lightkube only loads the
kubeconfig and credentials) and, where installed, gcloud, into one `ClusterSnapshot`. A section
that fails is recorded as unreadable with the error text; it never aborts the others, because a
half-broken cluster is exactly what doctor is for."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any

from elasticityops.backends.kubernetes.api import KubeApi, load_config
from elasticityops.backends.kubernetes.lease_store import record_of
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.domain.errors import EopsError, NotFound
from elasticityops.ops.doctor import parse
from elasticityops.ops.doctor.checks import CUSTOM_METRICS_SERVICE, required_access
from elasticityops.ops.doctor.options import GatherOptions as GatherOptions
from elasticityops.ops.doctor.snapshot import (
    AccessRule,
    ClusterSnapshot,
    CustomMetrics,
    KueueObject,
    KueueReading,
    LeaseInfo,
    PodLog,
    QuotaReading,
)
from elasticityops.ops.kueue import KUEUE_API
from elasticityops.ops.kueue_multikueue import CONTROLLER as MULTIKUEUE

MAX_PLUGIN_LOGS = 10
MAX_PENDING_PODS = 200
LOG_TAIL_LINES = 200
GCLOUD_TIMEOUT_S = 60.0

# Where each collection is; the doctor reads cluster-wide ones and, for namespaced kinds, either
# one namespace or all (`_list`'s namespace "*").
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
EVENTS = "/api/v1/events"
DAEMONSETS = "/apis/apps/v1/daemonsets"
API_SERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
HPAS = "/apis/autoscaling/v2/horizontalpodautoscalers"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
AUTOSCALER_STATUS = "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status"
KUEUE_GROUP = "/apis/kueue.x-k8s.io"
KUEUE = f"/apis/{KUEUE_API}"


def _error_text(error: BaseException) -> str:
    if isinstance(error, EopsError):
        return str(error)  # the client's translation: request, status, reason, server's message
    return f"{type(error).__name__}: {error}"


def _namespaced(path: str, namespace: str) -> str:
    """`/api/v1/pods` in one namespace, or in all of them for "*"."""
    if namespace == "*":
        return path
    prefix, kind = path.rsplit("/", 1)
    return f"{prefix}/namespaces/{namespace}/{kind}"


def _selector(pairs: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in pairs.items())


class _Reader:
    """One cluster connection and the unreadable-section ledger."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.unreadable: dict[str, str] = {}

    async def close(self) -> None:
        await self.api.close()

    async def section(self, name: str, work: Awaitable[Any]) -> Any:
        try:
            return await work
        except (EopsError, OSError, ValueError, KeyError) as error:
            self.unreadable[name] = _error_text(error)
            return None


async def _access(
    reader: _Reader, namespace: str, workload: str, kueue: bool, nominate: bool
) -> tuple[AccessRule, ...]:
    async def review(rule: AccessRule) -> AccessRule:
        attributes: dict[str, str] = {"verb": rule.verb, "group": rule.group, "resource": rule.resource}
        if rule.subresource:
            attributes["subresource"] = rule.subresource
        if rule.namespaced:
            attributes["namespace"] = namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        result = await reader.api.create(ACCESS_REVIEWS, body)
        status = result.get("status", {})
        return replace(
            rule,
            allowed=bool(status.get("allowed")),
            reason=str(status.get("reason") or status.get("evaluationError") or ""),
        )

    rules = required_access(workload, kueue, nominate)
    return tuple(await asyncio.gather(*(review(rule) for rule in rules)))


async def _identity(reader: _Reader) -> str:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    result = await reader.api.create(SUBJECT_REVIEWS, review)
    return str(result.get("status", {}).get("userInfo", {}).get("username", ""))


async def _list(
    reader: _Reader,
    path: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> list[KubeObject]:
    """Every item of a collection: cluster-scoped (no namespace), of one namespace, or of all ("*")."""
    params: dict[str, str | int] = {}
    if labels:
        params["labelSelector"] = _selector(labels)
    if fields:
        params["fieldSelector"] = _selector(fields)
    items, _ = await reader.api.list(_namespaced(path, namespace) if namespace else path, params)
    return items


async def _log(reader: _Reader, namespace: str, name: str) -> str:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
    chunks = [chunk async for chunk in reader.api.stream(path, {"tailLines": LOG_TAIL_LINES}, follow=False)]
    return b"".join(chunks).decode(errors="replace")


async def _plugin_logs(reader: _Reader, daemonsets: list[KubeObject]) -> tuple[PodLog, ...]:
    logs: list[PodLog] = []
    for ds in daemonsets:
        namespace = ds["metadata"]["namespace"]
        labels = ds.get("spec", {}).get("selector", {}).get("matchLabels") or {}
        if not labels:
            continue
        pods = await _list(reader, PODS, namespace=namespace, labels=labels)
        for pod in pods[:MAX_PLUGIN_LOGS]:
            name = pod["metadata"]["name"]
            text = await _log(reader, namespace, name)
            logs.append(PodLog(namespace, name, str(pod.get("spec", {}).get("nodeName", "")), text))
    return tuple(logs)


async def _pending(reader: _Reader, namespace: str) -> tuple[Any, ...]:
    # Only ElasticityOps' namespace: Pending pods elsewhere are other teams' business, and listing
    # every namespace needs a cluster-wide grant the gateway does not have.
    pending = {"status.phase": "Pending"}
    pods = (await _list(reader, PODS, namespace=namespace, fields=pending))[:MAX_PENDING_PODS]
    by_namespace: dict[str, list[KubeObject]] = defaultdict(list)
    for pod in pods:
        by_namespace[pod["metadata"]["namespace"]].append(pod)
    events: dict[tuple[str, str], list[KubeObject]] = defaultdict(list)
    for namespace in by_namespace:
        for event in await _list(reader, EVENTS, namespace=namespace, fields={"involvedObject.kind": "Pod"}):
            involved = event.get("involvedObject", {})
            events[(namespace, str(involved.get("name", "")))].append(event)
    return tuple(
        parse.pending_pod(pod, events[(pod["metadata"]["namespace"], pod["metadata"]["name"])])
        for pod in pods
    )


async def _autoscaler_status(reader: _Reader) -> str | None:
    try:
        cm = await reader.api.get(AUTOSCALER_STATUS)
    except EopsError as error:
        reader.unreadable["autoscaler-status"] = _error_text(error)
        return None
    return str((cm.get("data") or {}).get("status", ""))


async def _gcloud(options: GatherOptions, args: list[str]) -> str:
    assert options.gcloud is not None
    process = await asyncio.create_subprocess_exec(
        options.gcloud, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), GCLOUD_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise OSError(f"gcloud {' '.join(args[:3])} did not answer in {GCLOUD_TIMEOUT_S:.0f} s") from None
    if process.returncode != 0:
        # gcloud wraps one message over several lines; keep it whole, on one line.
        text = " ".join(err.decode(errors="replace").split())
        raise OSError(text[:300] or f"gcloud exited {process.returncode}")
    return out.decode()


async def read_quota(options: GatherOptions, node_region: str) -> QuotaReading:
    if options.gcloud is None:
        return QuotaReading(gcloud_found=False)
    region = options.region or node_region
    try:
        project = options.project or (await _gcloud(options, ["config", "get-value", "project"])).strip()
        if not project or not region:
            return QuotaReading(
                True, project, region, error="no project or region known", target_unknown=True
            )
        raw = json.loads(
            await _gcloud(
                options, ["compute", "regions", "describe", region, "--project", project, "--format=json"]
            )
        )
    except (OSError, ValueError) as error:
        return QuotaReading(True, options.project or "", region, error=str(error))
    return QuotaReading(True, project, region, limits=parse.region_quotas(raw))


async def _lease(reader: _Reader, namespace: str, name: str) -> LeaseInfo | None:
    """The leader election's Lease, or None when there is none (no --leader-elect)."""
    try:
        raw = await reader.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    except NotFound:
        return None
    record = record_of(raw)
    ago = None if record.renew_time is None else time.time() - record.renew_time.timestamp()
    return LeaseInfo(record.holder, record.lease_duration_s, ago, record.transitions)


async def _nothing() -> None:
    return None


async def _found(reader: _Reader, section: str, path: str) -> dict[str, Any] | None:
    """The object at `path`; None when there is none, or (recorded) when it cannot be read."""
    try:
        return dict(await reader.api.get(path))
    except NotFound:
        return None
    except (EopsError, OSError, ValueError) as error:
        reader.unreadable[section] = _error_text(error)
        return None


async def _kueue(reader: _Reader, namespace: str, local_queue: str) -> KueueReading:
    """Kueue's API and the objects between the gateway's Jobs and their admission, each read
    only where what names it was found (the LocalQueue names the ClusterQueue, which names its
    AdmissionChecks)."""
    reading = KueueReading(local_queue)
    group = await _found(reader, "kueue-api", KUEUE_GROUP)
    versions = tuple(str(v.get("version", "")) for v in (group or {}).get("versions") or ())
    if KUEUE.rpartition("/")[2] not in versions:
        return replace(reading, versions=versions)
    discovery = await _found(reader, "kueue-api", KUEUE)
    resources = tuple(str(r.get("name", "")) for r in (discovery or {}).get("resources") or ())
    reading = replace(reading, versions=versions, resources=tuple(r for r in resources if "/" not in r))
    raw_local = await _found(
        reader, "kueue-local-queue", f"{KUEUE}/namespaces/{namespace}/localqueues/{local_queue}"
    )
    classes = await reader.section("kueue-priorities", _list(reader, f"{KUEUE}/workloadpriorityclasses"))
    reading = replace(
        reading,
        local_queue=parse.local_queue_info(raw_local) if raw_local else None,
        priority_classes=tuple(parse.workload_priority_class_info(raw) for raw in classes or ()),
    )
    if reading.local_queue is None or not reading.local_queue.cluster_queue:
        return reading
    raw_cluster = await _found(
        reader, "kueue-cluster-queue", f"{KUEUE}/clusterqueues/{reading.local_queue.cluster_queue}"
    )
    if raw_cluster is None:
        return reading
    cluster_queue = parse.cluster_queue_info(raw_cluster)
    # Whether the ClusterQueue selects the namespace. Its name label is there on every namespace
    # (the API server sets it), so a doctor that may not read namespaces still judges by it.
    raw_namespace = await _found(reader, "kueue-namespace", f"/api/v1/namespaces/{namespace}")
    name_label = {"kubernetes.io/metadata.name": namespace}
    labels = (raw_namespace or {}).get("metadata", {}).get("labels") or name_label
    reading = replace(reading, namespace_labels=dict(labels), namespace_labels_read=raw_namespace is not None)
    checks: dict[str, KueueObject | None] = {}
    for name in cluster_queue.admission_checks:
        raw_check = await _found(reader, "kueue-admission-checks", f"{KUEUE}/admissionchecks/{name}")
        checks[name] = parse.admission_check_info(raw_check) if raw_check else None
    reading = replace(reading, cluster_queue=cluster_queue, admission_checks=checks)
    return await _multikueue(reader, reading)


async def _multikueue(reader: _Reader, reading: KueueReading) -> KueueReading:
    """The worker clusters a MultiKueue check of the queue dispatches to, each with its Active
    condition (whether the manager's Kueue is connected to it)."""
    check = next((c for c in reading.admission_checks.values() if c and c.controller == MULTIKUEUE), None)
    if check is None or not check.parameters:
        return reading
    config = await _found(reader, "kueue-multikueue", f"{KUEUE}/multikueueconfigs/{check.parameters}")
    names = [str(n) for n in ((config or {}).get("spec") or {}).get("clusters") or ()]
    clusters: dict[str, KueueObject | None] = {}
    for name in names:
        raw = await _found(reader, "kueue-multikueue", f"{KUEUE}/multikueueclusters/{name}")
        clusters[name] = parse.multikueue_cluster_info(raw) if raw else None
    return replace(
        reading, multikueue_config=check.parameters if config else "", multikueue_clusters=clusters
    )


async def gather(options: GatherOptions) -> ClusterSnapshot:
    settings = options.client_settings()
    try:
        config = load_config(settings)
        api = KubeApi.from_config(config, settings)
    except EopsError as error:
        return ClusterSnapshot(
            api_reachable=False,
            api_error=f"kubeconfig: {_error_text(error)}",
            namespace=options.namespace,
            peak=options.peak,
            gpu_type=options.gpu_type,
            quota=await read_quota(options, ""),
        )
    namespace = options.namespace
    queue = options.kueue_queue
    reader = _Reader(api)
    try:
        try:
            version = await reader.api.get("/version")
        except (EopsError, ValueError) as error:
            return ClusterSnapshot(
                api_reachable=False,
                api_error=_error_text(error),
                namespace=namespace,
                peak=options.peak,
                gpu_type=options.gpu_type,
                quota=await read_quota(options, ""),
            )
        (
            access,
            identity,
            nodes,
            daemonsets,
            api_services,
            hpas,
            priority_classes,
            pending,
            autoscaler,
            lease,
            kueue,
        ) = await asyncio.gather(
            reader.section(
                "access",
                _access(reader, namespace, options.workload, queue is not None, options.nominate_wait_s > 0),
            ),
            reader.section("identity", _identity(reader)),
            reader.section("nodes", _list(reader, NODES)),
            reader.section("daemonsets", _list(reader, DAEMONSETS, namespace="*")),
            reader.section("apiservices", _list(reader, API_SERVICES)),
            reader.section("hpas", _list(reader, HPAS, namespace="*")),
            reader.section("priorityclasses", _list(reader, PRIORITY_CLASSES)),
            reader.section("pods", _pending(reader, namespace)),
            _autoscaler_status(reader),
            reader.section("lease", _lease(reader, namespace, options.lease_name)),
            _kueue(reader, namespace, queue) if queue is not None else _nothing(),
        )
        plugins = [ds for ds in daemonsets or () if parse.is_device_plugin(ds)]
        logs = await reader.section("device-plugin-logs", _plugin_logs(reader, plugins)) if plugins else ()
        services = tuple(parse.api_service_info(raw) for raw in api_services or ())
        custom = next((s for s in services if s.name == CUSTOM_METRICS_SERVICE), None)
        served: tuple[str, ...] = ()
        if custom is not None and custom.available:
            discovery = await reader.section(
                "custom-metrics", reader.api.get("/apis/custom.metrics.k8s.io/v1beta1")
            )
            served = tuple(str(r.get("name", "")) for r in (discovery or {}).get("resources") or ())
        now = time.time()
        node_infos = tuple(parse.node_info(raw, now) for raw in nodes or ())
        region = next(
            (
                n.labels.get("topology.kubernetes.io/region", "")
                for n in node_infos
                if n.labels.get("topology.kubernetes.io/region")
            ),
            "",
        )
        quota = await read_quota(options, region)
        return ClusterSnapshot(
            api_reachable=True,
            server_version=str(version.get("gitVersion", "")),
            namespace=namespace,
            identity=identity or "",
            access=access or (),
            nodes=node_infos,
            device_plugins=tuple(parse.daemonset_info(ds) for ds in plugins),
            device_plugin_logs=logs or (),
            api_services=services,
            custom_metrics=CustomMetrics(api_service=custom, served=served),
            hpas=tuple(parse.hpa_info(raw) for raw in hpas or ()),
            priority_classes=tuple(parse.priority_class_info(raw) for raw in priority_classes or ()),
            pending_pods=pending or (),
            autoscaler_status=autoscaler,
            quota=quota,
            peak=options.peak,
            gpu_type=options.gpu_type,
            lease_name=options.lease_name,
            lease=lease,
            kueue=kueue,
            unreadable=dict(reader.unreadable),
        )
    finally:
        await reader.close()
