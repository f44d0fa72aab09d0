"""The doctor's only I/O: read the cluster (lightkube's async client) and, where installed, gcloud,
into one `ClusterSnapshot`. A section that fails is recorded as unreadable with the error text;
it never aborts the others, because a half-broken cluster is exactly what doctor is for."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import AsyncClient as raw_async_client
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.apiregistration_v1 import APIService
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.core_v1 import ConfigMap, Event, Node, Pod
from lightkube.resources.scheduling_v1 import PriorityClass

from elasticityops.ops.doctor import parse
from elasticityops.ops.doctor.checks import CUSTOM_METRICS_SERVICE, REQUIRED_ACCESS
from elasticityops.ops.doctor.snapshot import (
    AccessRule,
    ClusterSnapshot,
    CustomMetrics,
    PodLog,
    QuotaReading,
)

MAX_PLUGIN_LOGS = 10
MAX_PENDING_PODS = 200
LOG_TAIL_LINES = 200
GCLOUD_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class GatherOptions:
    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None
    peak: int | None = None
    gpu_type: str = "nvidia-tesla-t4"
    project: str | None = None
    region: str | None = None
    gcloud: str | None = None  # path of the gcloud binary; None: not installed
    timeout_s: float = 10.0
    extra_env: dict[str, str] = field(default_factory=dict)


def _error_text(error: BaseException) -> str:
    if isinstance(error, ApiError):
        return f"{error.status.code} {error.status.reason or ''}: {error.status.message}".strip()
    return f"{type(error).__name__}: {error}"


def load_config(options: GatherOptions) -> SingleConfig:
    kubeconfig = KubeConfig.from_file(options.kubeconfig) if options.kubeconfig else KubeConfig.from_env()
    config = kubeconfig.get(context_name=options.context)
    if config is None:
        raise ConfigError("no current context in the kubeconfig")
    return config


class _Reader:
    """One cluster connection and the unreadable-section ledger."""

    def __init__(self, config: SingleConfig, namespace: str, timeout_s: float) -> None:
        timeout = httpx2.Timeout(timeout_s)
        self.client = AsyncClient(config, namespace=namespace, timeout=timeout, trust_env=False)
        # Discovery documents (/version, /apis/<group>/<version>) are not resources; lightkube
        # builds the same authenticated httpx client for them from the same config.
        self.raw = raw_async_client(config, ConnectionParams(timeout=timeout, trust_env=False))
        self.unreadable: dict[str, str] = {}

    async def close(self) -> None:
        await self.client.close()
        await self.raw.aclose()

    async def get_json(self, path: str) -> dict[str, Any]:
        response = await self.raw.get(path)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    async def section(self, name: str, work: Awaitable[Any]) -> Any:
        try:
            return await work
        except (ApiError, httpx2.HTTPError, OSError, ValueError, KeyError) as error:
            self.unreadable[name] = _error_text(error)
            return None


async def _access(reader: _Reader, namespace: str) -> tuple[AccessRule, ...]:
    async def review(rule: AccessRule) -> AccessRule:
        body = SelfSubjectAccessReview(
            spec=SelfSubjectAccessReviewSpec(
                resourceAttributes=ResourceAttributes(
                    verb=rule.verb,
                    group=rule.group,
                    resource=rule.resource,
                    subresource=rule.subresource or None,
                    namespace=namespace if rule.namespaced else None,
                )
            )
        )
        result = (await reader.client.create(body)).to_dict()
        status = result.get("status", {})
        return replace(
            rule,
            allowed=bool(status.get("allowed")),
            reason=str(status.get("reason") or status.get("evaluationError") or ""),
        )

    return tuple(await asyncio.gather(*(review(rule) for rule in REQUIRED_ACCESS)))


async def _identity(reader: _Reader) -> str:
    review = SelfSubjectReview()
    result = (await reader.client.create(review)).to_dict()
    return str(result.get("status", {}).get("userInfo", {}).get("username", ""))


async def _list(reader: _Reader, resource: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [item.to_dict() async for item in reader.client.list(resource, **kwargs)]


async def _plugin_logs(reader: _Reader, daemonsets: list[dict[str, Any]]) -> tuple[PodLog, ...]:
    logs: list[PodLog] = []
    for ds in daemonsets:
        namespace = ds["metadata"]["namespace"]
        labels = ds.get("spec", {}).get("selector", {}).get("matchLabels") or {}
        if not labels:
            continue
        pods = await _list(reader, Pod, namespace=namespace, labels=labels)
        for pod in pods[:MAX_PLUGIN_LOGS]:
            name = pod["metadata"]["name"]
            lines = [
                line async for line in reader.client.log(name, namespace=namespace, tail_lines=LOG_TAIL_LINES)
            ]
            logs.append(PodLog(namespace, name, str(pod.get("spec", {}).get("nodeName", "")), "".join(lines)))
    return tuple(logs)


async def _pending(reader: _Reader, namespace: str) -> tuple[Any, ...]:
    # Only ElasticityOps' namespace: Pending pods elsewhere are other teams' business, and listing
    # every namespace needs a cluster-wide grant the gateway does not have.
    pending = {"status.phase": "Pending"}
    pods = (await _list(reader, Pod, namespace=namespace, fields=pending))[:MAX_PENDING_PODS]
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        by_namespace[pod["metadata"]["namespace"]].append(pod)
    events: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for namespace in by_namespace:
        for event in await _list(reader, Event, namespace=namespace, fields={"involvedObject.kind": "Pod"}):
            involved = event.get("involvedObject", {})
            events[(namespace, str(involved.get("name", "")))].append(event)
    return tuple(
        parse.pending_pod(pod, events[(pod["metadata"]["namespace"], pod["metadata"]["name"])])
        for pod in pods
    )


async def _autoscaler_status(reader: _Reader) -> str | None:
    try:
        cm = (
            await reader.client.get(ConfigMap, "cluster-autoscaler-status", namespace="kube-system")
        ).to_dict()
    except ApiError as error:
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


async def gather(options: GatherOptions) -> ClusterSnapshot:
    try:
        config = load_config(options)
    except (ConfigError, OSError, ValueError, KeyError) as error:
        return ClusterSnapshot(
            api_reachable=False,
            api_error=f"kubeconfig: {_error_text(error)}",
            peak=options.peak,
            gpu_type=options.gpu_type,
            quota=await read_quota(options, ""),
        )
    namespace = options.namespace or config.namespace or "default"
    reader = _Reader(config, namespace, options.timeout_s)
    try:
        try:
            version = await reader.get_json("/version")
        except (httpx2.HTTPError, OSError, ValueError) as error:
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
        ) = await asyncio.gather(
            reader.section("access", _access(reader, namespace)),
            reader.section("identity", _identity(reader)),
            reader.section("nodes", _list(reader, Node)),
            reader.section("daemonsets", _list(reader, DaemonSet, namespace="*")),
            reader.section("apiservices", _list(reader, APIService)),
            reader.section("hpas", _list(reader, HorizontalPodAutoscaler, namespace="*")),
            reader.section("priorityclasses", _list(reader, PriorityClass)),
            reader.section("pods", _pending(reader, namespace)),
            _autoscaler_status(reader),
        )
        plugins = [ds for ds in daemonsets or () if parse.is_device_plugin(ds)]
        logs = await reader.section("device-plugin-logs", _plugin_logs(reader, plugins)) if plugins else ()
        services = tuple(parse.api_service_info(raw) for raw in api_services or ())
        custom = next((s for s in services if s.name == CUSTOM_METRICS_SERVICE), None)
        served: tuple[str, ...] = ()
        if custom is not None and custom.available:
            discovery = await reader.section(
                "custom-metrics", reader.get_json("/apis/custom.metrics.k8s.io/v1beta1")
            )
            served = tuple(str(r.get("name", "")) for r in (discovery or {}).get("resources") or ())
        node_infos = tuple(parse.node_info(raw) for raw in nodes or ())
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
            unreadable=dict(reader.unreadable),
        )
    finally:
        await reader.close()
