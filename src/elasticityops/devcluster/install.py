"""Objects `up` puts into a fresh cluster: PriorityClasses, for the real autoscaler its CRDs and
the kwok provider's ConfigMaps, and with --kueue what Kueue's manager needs. Each create
tolerates Conflict, so a retried `up` is harmless."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from pathlib import Path
from typing import Any

import yaml

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.devcluster import kueue_setup
from elasticityops.devcluster.certs import ServingPki, generate_serving_pki
from elasticityops.devcluster.errors import StartupError
from elasticityops.devcluster.kueue_setup import KueuePorts
from elasticityops.devcluster.kwok_provider import configmaps
from elasticityops.devcluster.paths import KueueBuild
from elasticityops.domain.errors import Conflict, EopsError

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _create(api: BlockingKubeApi, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(Conflict):
        api.create(path, body)


def install_priority_classes(api: BlockingKubeApi) -> list[str]:
    """The PriorityClasses `eops render gke` renders (one definition: backends/kubernetes/deploy.py);
    without them every invocation of `eops serve --backend kubernetes` fails at launch."""
    names = []
    for pc in priority_classes():
        _create(api, "/apis/scheduling.k8s.io/v1/priorityclasses", pc)
        names.append(str(pc["metadata"]["name"]))
    return names


def install_namespace(api: BlockingKubeApi, name: str) -> None:
    """The namespace `eops serve --backend kubernetes` puts its Jobs in by default: the README's
    tour runs the gateway against a fresh `up` with no other step."""
    _create(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def crd_documents(crd_dir: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(crd_dir.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return docs


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_crds(api: BlockingKubeApi, crd_dir: Path, timeout: float) -> list[str]:
    """Create the CRDs and wait until the API server serves them: the autoscaler's informers for
    ProvisioningRequests and CapacityBuffers fail at start against a CRD not yet established."""
    return install_crd_documents(api, crd_documents(crd_dir), timeout)


def install_crd_documents(api: BlockingKubeApi, docs: list[dict[str, Any]], timeout: float) -> list[str]:
    names = []
    for doc in docs:
        _create(api, CRD_PATH, doc)
        names.append(str(doc["metadata"]["name"]))
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        waiting = [n for n in waiting if not _established(api.get(f"{CRD_PATH}/{n}"))]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise StartupError(f"CRDs not established after {timeout:.0f}s: {', '.join(waiting)}")
        time.sleep(0.2)
    return names


_WEBHOOK_PATHS = {
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


def install_kueue(api: BlockingKubeApi, build: KueueBuild, ports: KueuePorts, timeout: float) -> ServingPki:
    """What Kueue's manager needs before it starts: its namespace, the Secret its certificate
    rotator takes (certs made for 127.0.0.1 too), its CRDs with their conversion webhooks, and
    its admission webhooks, every webhook calling the manager on 127.0.0.1. Returns the
    certificates, which a pod would find mounted from the Secret."""
    pki = generate_serving_pki(kueue_setup.CA_NAME, (kueue_setup.SERVICE_DNS_NAME,))
    install_namespace(api, kueue_setup.NAMESPACE)
    _create(
        api,
        f"/api/v1/namespaces/{kueue_setup.NAMESPACE}/secrets",
        kueue_setup.cert_secret(pki.ca_cert, pki.ca_key, pki.cert, pki.key),
    )
    patch_files = kueue_setup.conversion_patched((build.crd_dir / "kustomization.yaml").read_text())
    patches = [yaml.safe_load((build.crd_dir / f).read_text()) for f in patch_files]
    crds = kueue_setup.with_conversion(
        crd_documents(build.crd_dir / "bases"), patches, ports.webhook, pki.ca_cert
    )
    install_crd_documents(api, crds, timeout)
    for config in kueue_setup.webhook_configurations(build.webhooks.read_text(), ports.webhook, pki.ca_cert):
        _create(api, _WEBHOOK_PATHS[config["kind"]], config)
    return pki


def install_kwok_provider_config(api: BlockingKubeApi, namespace: str, max_nodes: int, region: str) -> None:
    # Copies of a template start NotReady as of now (the cluster's start), as a kubelet's
    # first status would be dated at registration.
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for cm in configmaps(namespace, max_nodes, now, region):
        _create(api, f"/api/v1/namespaces/{namespace}/configmaps", cm)


_KUEUE_PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "ProvisioningRequestConfig": "provisioningrequestconfigs",
    "AdmissionCheck": "admissionchecks",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "MultiKueueCluster": "multikueueclusters",
    "MultiKueueConfig": "multikueueconfigs",
}


def object_path(manifest: dict[str, Any]) -> str:
    """The collection `manifest` is created in: a core Secret, or one of Kueue's kinds."""
    kind, ns = manifest["kind"], manifest["metadata"].get("namespace")
    if kind == "Secret":
        return f"/api/v1/namespaces/{ns}/secrets"
    if kind not in _KUEUE_PLURALS:
        raise ValueError(f"no collection known for kind {kind}")
    group = f"/apis/{manifest['apiVersion']}"
    where = f"{group}/namespaces/{ns}" if ns else group
    return f"{where}/{_KUEUE_PLURALS[kind]}"


def install_objects(api: BlockingKubeApi, manifests: list[dict[str, Any]], timeout: float) -> None:
    """Create each object in order (one that exists is kept). Kueue's validating webhooks see
    its kinds: in the first seconds after its /readyz a create can still fail on the webhook's
    connection, so a failed create is tried again until `timeout`."""
    for manifest in manifests:
        path = object_path(manifest)
        deadline = time.monotonic() + timeout
        while True:
            try:
                _create(api, path, manifest)
                break
            except EopsError as exc:
                if time.monotonic() > deadline:
                    raise StartupError(
                        f"{manifest['kind']} {manifest['metadata']['name']} not created: {exc}"
                    ) from None
                time.sleep(1.0)
