"""`eops render kueue --multikueue`: the objects a MultiKueue manager cluster needs to dispatch the
gateway's Jobs to its workers (pure: `manager_objects(queue objects, kubeconfigs)`), in the order
`kubectl apply -f -` takes in one go.

- A Secret per worker in Kueue's namespace holding the worker's kubeconfig under the key
  `kubeconfig`, its credentials embedded: Kueue refuses file paths and token files unless its
  `MultiKueueAllowInsecureKubeconfigs` gate is on (multikueuecluster.go, validateKubeconfig), so
  a kubeconfig that names files is refused here, naming the fix.
- A MultiKueueCluster per worker naming its Secret, one MultiKueueConfig naming them all, and the
  AdmissionCheck of MultiKueue's controller.
- The queue objects of `eops render kueue` with every ClusterQueue gated by that check alone: on
  the manager a workload is admitted once a worker has admitted it; capacity checks (the
  ProvisioningRequest's) belong on the workers.

The workers get `eops render kueue` as it is: MultiKueue wants the manager's namespaces and
LocalQueues mirrored on each worker (docs/multi-cluster.md)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from dataclasses import replace

import yaml

from elasticityops.backends.kubernetes.labels import MULTIKUEUE_CONTROLLER
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.ops.kueue import NO_PROVISIONING, KueueInputs, kueue_manifests
from elasticityops.ops.yaml_docs import Document, Manifest, dump_documents

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"  # where Kueue's manager reads the kubeconfig Secrets
CONTROLLER = MULTIKUEUE_CONTROLLER
CHECK_NAME = "eops-multikueue"
CONFIG_NAME = "eops"


def secret_name(worker: str) -> str:
    """The Secret in Kueue's namespace on the manager holding `worker`'s kubeconfig."""
    return f"multikueue-{worker}"


def kubeconfig_secret(worker: str, kubeconfig: str) -> Manifest:
    """The Secret MultiKueue reads `worker`'s kubeconfig from (key `kubeconfig`). ValueError for
    one that points at files, which Kueue would refuse too."""
    try:
        doc = yaml.safe_load(kubeconfig) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{worker}'s kubeconfig is not YAML ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise ValueError(f"{worker}'s kubeconfig names no cluster")
    for entry in doc.get("clusters") or []:
        if "certificate-authority-data" not in ((entry or {}).get("cluster") or {}):
            raise ValueError(f"{worker}'s kubeconfig: embed the CA (certificate-authority-data)")
    for entry in doc.get("users") or []:
        user = (entry or {}).get("user") or {}
        if "tokenFile" in user or "client-certificate" in user or "client-key" in user:
            raise ValueError(f"{worker}'s kubeconfig: embed the credentials, no file paths")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(worker), "namespace": KUEUE_NAMESPACE},
        "type": "Opaque",
        "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
    }


def multikueue_cluster(worker: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueCluster",
        "metadata": {"name": worker},
        "spec": {
            "clusterSource": {"kubeConfig": {"location": secret_name(worker), "locationType": "Secret"}}
        },
    }


def multikueue_config(workers: tuple[str, ...]) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueConfig",
        "metadata": {"name": CONFIG_NAME},
        "spec": {"clusters": list(workers)},
    }


def admission_check() -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK_NAME},
        "spec": {
            "controllerName": CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CONFIG_NAME},
        },
    }


def _through_multikueue(obj: Manifest) -> Manifest:
    if obj.get("kind") != "ClusterQueue":
        return obj
    queue = copy.deepcopy(obj)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK_NAME}]}
    return queue


def manager_objects(queue_objects: list[Manifest], kubeconfigs: Mapping[str, str]) -> list[Manifest]:
    """Everything the manager gets, each object before what names it: a Secret and a
    MultiKueueCluster per worker (`kubeconfigs`: worker name to its kubeconfig's text), the
    MultiKueueConfig, the AdmissionCheck, then `queue_objects` (what `eops render kueue`
    renders) with every ClusterQueue gated by MultiKueue's check. ValueError where it cannot be."""
    workers = tuple(kubeconfigs)
    if not workers:
        raise ValueError("a MultiKueue manager needs at least one worker")
    if not any(o.get("kind") == "ClusterQueue" for o in queue_objects):
        raise ValueError("the manager's queue objects have no ClusterQueue to put MultiKueue's check on")
    return [
        *(kubeconfig_secret(w, kubeconfigs[w]) for w in workers),
        *(multikueue_cluster(w) for w in workers),
        multikueue_config(workers),
        admission_check(),
        *(_through_multikueue(o) for o in queue_objects),
    ]


def render_manager(inputs: KueueInputs, kubeconfigs: Mapping[str, str]) -> dict[str, str]:
    """The manager's objects as one YAML stream, `kueue-manager.yaml`: `inputs`' queue objects
    without a capacity check (that belongs on the workers), gated by MultiKueue's check, after
    the workers' Secrets, MultiKueueClusters, MultiKueueConfig and the check."""
    queues = kueue_manifests(replace(inputs, provisioning_class=NO_PROVISIONING))
    try:
        objects = manager_objects(queues, kubeconfigs)
    except ValueError as exc:
        fix = "give each worker's kubeconfig, credentials embedded (kubectl config view --raw --flatten)"
        raise InvalidInput([FieldProblem("multikueue", str(exc), fix)]) from None
    header = (
        f"A MultiKueue manager for ElasticityOps: LocalQueue {inputs.local_queue} in {inputs.namespace}, "
        f"ClusterQueue {inputs.cluster_queue} dispatching to {', '.join(kubeconfigs)}.\n"
        f"GPU quota per type: {inputs.gpu_budget}. Each worker: eops render kueue with its own quota."
    )
    return {"kueue-manager.yaml": dump_documents([Document(m) for m in objects], header)}
