"""Kueue as the dev cluster runs it: its manager a process beside the control plane, reached by
the API server on 127.0.0.1. Pure: the manager's configuration, and upstream's webhook and CRD
manifests rewritten for that (the caller reads them from Kueue's module and applies the result).

In a real cluster Kueue runs in a pod behind the Service `kueue-webhook-service`, and its own
certificate rotator makes a certificate for that Service's DNS name. Here no Service routes, so
every webhook (admission and CRD conversion) names `https://127.0.0.1:PORT/PATH`, and the Secret
the rotator reads holds a certificate made beforehand for the Service's name AND 127.0.0.1
(certs.generate_serving_pki): the rotator finds it valid, keeps it, writes it where the webhook
server reads it and puts its CA in every webhook's caBundle, as it does in a cluster.

Kept from upstream: the webhooks of the frameworks this cluster enables (batch/v1 Jobs) and of
Kueue's own kinds. Left out: those of kinds the dev cluster does not serve (Ray, Kubeflow,
JobSet, ...) and of plain pods, Deployments and StatefulSets, whose webhooks fail every pod's
creation while Kueue is down. Its visibility API is an APIService, which needs a Service: it is
not served (the VisibilityOnDemand gate is off), and the gateway reads queue order from the
Workload objects instead."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
CA_NAME = "kueue-ca"  # the name Kueue's rotator checks its CA by (pkg/util/cert)
SERVICE_DNS_NAME = f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc"
FRAMEWORKS = ("batch/job",)
_SERVED_GROUPS = frozenset({"batch", "kueue.x-k8s.io"})
_NAME_PREFIX = "kueue-"  # what upstream's kustomization prefixes every name with

Manifest = dict[str, Any]


@dataclass(frozen=True)
class KueuePorts:
    """Where the manager listens, all on 127.0.0.1."""

    webhook: int
    health: int
    metrics: int


DISPATCHERS = {
    "all-at-once": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
    # An external dispatcher: Kueue waits for another controller to nominate the workers; the
    # gateway does with --kube-nominate-wait (backends/kubernetes/nominating.py).
    "gateway": "eops.dev/gateway",
}
"""`eops dev-cluster up --multikueue --dispatcher NAME`: the manager's multiKueue.dispatcherName."""


WORKER_QPS_ENV = "EOPS_MULTIKUEUE_WORKER_QPS"  # read by the build patch, in the worker clients


@dataclass(frozen=True)
class MultiKueueManager:
    """The `multiKueue` section of a MultiKueue manager's Configuration, and the rate of its
    clients to the workers.

    That rate is not in the Configuration: v0.17.0 builds each client from the worker's
    kubeconfig alone (pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
    newClientWithWatch: `clientcmd.RESTConfigFromKubeConfig`, no QPS or Burst set), so they keep
    client-go's 5 QPS, burst 10 (kueue#14973); `clientConnection` paces only its own cluster's
    client (cmd/kueue/main.go). Later releases reuse `clientConnection` for them behind a gate;
    the dev cluster's build patch (patches/kueue-multikueue-worker-rate.patch) stands in for it
    with an environment variable (`worker_qps`, `env`)."""

    origin: str = "eops-dev"  # the label value that marks what this manager made on a worker
    # how the manager picks the workers that may admit a workload (configuration_types.go):
    # every worker at once, or up to three per 5-minute round (the incremental dispatcher)
    dispatcher: str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    # s a workload stays dispatched to a worker Kueue lost the connection to (upstream's 15 min)
    worker_lost_timeout_s: float = 900.0
    gc_interval_s: float = 60.0  # s between two sweeps for orphans on the workers (upstream's 1 min)
    # the clients to the workers: QPS (burst twice it); 0: client-go's 5 QPS, burst 10, upstream's
    worker_qps: float = 0.0

    def env(self) -> dict[str, str]:
        """What the manager's Kueue process gets in its environment for the patched rate."""
        return {WORKER_QPS_ENV: f"{self.worker_qps:g}"} if self.worker_qps > 0 else {}

    def to_config(self) -> Manifest:
        return {
            "origin": self.origin,
            "workerLostTimeout": f"{self.worker_lost_timeout_s:g}s",
            "gcInterval": f"{self.gc_interval_s:g}s",
            "dispatcherName": self.dispatcher,
        }


def manager_config(
    ports: KueuePorts,
    cert_dir: str,
    multikueue: MultiKueueManager | None = None,
    pods_ready_timeout_s: float | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> Manifest:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for a manager out of the cluster;
    with `multikueue`, one that dispatches to worker clusters; with `pods_ready_timeout_s`, one
    that evicts a Workload whose pods are not ready that long after its admission;
    `feature_gates` on top of the dev cluster's own (`with_feature_gates`)."""
    config = with_feature_gates(_config(ports, cert_dir), feature_gates or {})
    if multikueue is not None:
        config["multiKueue"] = multikueue.to_config()
    if pods_ready_timeout_s is not None:
        config["waitForPodsReady"] = pods_ready(pods_ready_timeout_s)
    return config


VISIBILITY_GATE = "VisibilityOnDemand"
"""Kept off: its APIService needs a Service in the cluster, which a dev cluster has not."""


def with_feature_gates(config: Manifest, gates: Mapping[str, bool]) -> Manifest:
    """`config` with `gates` set among its featureGates (Kueue refuses a name it does not know
    when it starts). The visibility API's gate stays off whatever is asked."""
    if gates.get(VISIBILITY_GATE):
        raise ValueError(
            f"Kueue feature gate {VISIBILITY_GATE}: its APIService needs a Service, which a dev "
            "cluster has not; leave it off (docs/kueue.md, queue_position)"
        )
    return {**config, "featureGates": {**config.get("featureGates", {}), **gates}}


def pods_ready(timeout_s: float) -> Manifest:
    """Kueue's waitForPodsReady (configuration_types.go; v1beta2 has no `enable`: the section
    is the switch). Other admissions go on meanwhile (blockAdmission false: one pod waiting
    for a node in a stocked-out zone must not hold up the queue). An evicted Workload is queued
    again after `timeout_s` at first, doubling (upstream's base is 60 s); on a MultiKueue worker
    the manager takes it back at once (MultiKueueRedoAdmissionOnEvictionInWorker, on by default
    since v0.16) and dispatches it again."""
    return {
        "timeout": f"{timeout_s:.0f}s",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": max(1, round(timeout_s))},
    }


def _config(ports: KueuePorts, cert_dir: str) -> Manifest:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": cert_dir},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        # The gateway creates Jobs in bursts of hundreds: upstream's 50/100 would pace Kueue's
        # own writes (Workloads, unsuspends) below what the control plane takes.
        "clientConnection": {"qps": 500, "burst": 1000},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "featureGates": {VISIBILITY_GATE: False},
    }


def _url(port: int, path: str) -> str:
    return f"https://127.0.0.1:{port}{path}"


def _serves(webhook: Manifest) -> bool:
    groups = {g for rule in webhook.get("rules") or [] for g in rule.get("apiGroups") or []}
    return bool(groups) and groups <= _SERVED_GROUPS


def webhook_configurations(manifests: str, port: int, ca_pem: bytes) -> list[Manifest]:
    """Upstream's Mutating- and ValidatingWebhookConfiguration (config/components/webhook), named
    as its kustomization names them, with only the webhooks of what this cluster serves, each
    calling the manager on 127.0.0.1."""
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        config = copy.deepcopy(doc)
        config["metadata"]["name"] = _NAME_PREFIX + config["metadata"]["name"]
        kept = []
        for webhook in config.get("webhooks") or []:
            if not _serves(webhook):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": _url(port, path), "caBundle": ca}
            kept.append(webhook)
        config["webhooks"] = kept
        out.append(config)
    return out


def conversion_patched(kustomization: str) -> list[str]:
    """The patch files upstream's CRD kustomization applies (config/components/crd): the
    conversion webhooks of the CRDs that serve two versions."""
    doc = yaml.safe_load(kustomization) or {}
    return [str(p["path"]) for p in doc.get("patches") or [] if "path" in p]


def with_conversion(
    crds: Iterable[Manifest], patches: Iterable[Manifest], port: int, ca_pem: bytes
) -> list[Manifest]:
    """`crds` with the conversion webhook each patch gives its CRD, calling the manager on
    127.0.0.1 (`/convert`)."""
    ca = base64.b64encode(ca_pem).decode()
    conversions = {}
    for patch in patches:
        conversion = copy.deepcopy(patch["spec"]["conversion"])
        config = conversion["webhook"]["clientConfig"]
        conversion["webhook"]["clientConfig"] = {"url": _url(port, config["service"]["path"]), "caBundle": ca}
        conversions[patch["metadata"]["name"]] = conversion
    out = []
    for crd in crds:
        crd = copy.deepcopy(crd)
        conversion = conversions.get(crd["metadata"]["name"])
        if conversion is not None:
            crd["spec"]["conversion"] = conversion
        out.append(crd)
    return out


def cert_secret(ca_cert: bytes, ca_key: bytes, cert: bytes, key: bytes) -> Manifest:
    """The Secret Kueue's certificate rotator reads first (its keys: cert-controller's)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {"ca.crt": b64(ca_cert), "ca.key": b64(ca_key), "tls.crt": b64(cert), "tls.key": b64(key)},
    }
