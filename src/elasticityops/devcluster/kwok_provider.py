"""What the real cluster-autoscaler's kwok cloud provider reads (pure: settings in, objects out).

Two ConfigMaps in the autoscaler's namespace: `kwok-provider-config` (how nodes are grouped, which
label names the GPU type) and `kwok-provider-templates` (one template Node per node group). The
groups are GKE-like auto-provisioned pools: one T4 group per zone (n1-standard-4 + 1 T4, labelled
and tainted as the static pool's nodes are, see nodes.py) and one L4 group (g2-standard-8), so a
second GPU type exists. Groups are named by `cloud.google.com/gke-nodepool`; the static baseline
pool carries that label too but no template, so it belongs to no group and is never scaled down.
"""

from __future__ import annotations

from typing import Any

import yaml

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE, HOSTNAME_LABEL
from elasticityops.devcluster.nodes import (
    POOL_LABEL,
    REGION,
    ROLE_AUTOSCALED,
    gpu_node,
    zones_of,
)

PROVIDER_CONFIG = "kwok-provider-config"
TEMPLATES_CONFIG = "kwok-provider-templates"
T4_TYPE = "nvidia-tesla-t4"
L4_TYPE = "nvidia-l4"
# A NAP pool holds at most 1,000 nodes per zone on GKE (../shared/notes/gke-gpu-facts.md).
POOL_SIZE_LIMIT = 1000
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
# The kwok provider's annotations on a template node (cloudprovider/kwok/kwok_constants.go).
MIN_COUNT = "cluster-autoscaler.kwok.nodegroup/min-count"
MAX_COUNT = "cluster-autoscaler.kwok.nodegroup/max-count"
# g2-standard-8: 8 vCPU, 32 GB, one L4 (GKE's machine catalogue).
L4_RESOURCES = {
    "cpu": "8",
    "memory": "32Gi",
    GPU_RESOURCE: "1",
    "pods": "110",
    "ephemeral-storage": "100Gi",
}


def t4_group(zone: str) -> str:
    return f"nap-t4-{zone}"


def l4_zone(region: str = REGION) -> str:
    """The one zone of the region with an L4 group (its first)."""
    return zones_of(region)[0]


def l4_group(region: str = REGION) -> str:
    return f"nap-l4-{l4_zone(region)}"


def group_names(region: str = REGION) -> tuple[str, ...]:
    return (*(t4_group(z) for z in zones_of(region)), l4_group(region))


def provider_config() -> dict[str, Any]:
    """The kwok provider's own config (`kwok-provider-config`, key `config`)."""
    return {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": POOL_LABEL},
        # Without skipTaint every new node gets kwok-provider=true:NoSchedule, which no Job tolerates.
        "nodes": {
            "skipTaint": True,
            "gpuConfig": {
                "gpuLabelKey": ACCELERATOR_LABEL,
                "availableGPUTypes": {T4_TYPE: {}, L4_TYPE: {}},
            },
        },
        "configmap": {"name": TEMPLATES_CONFIG, "key": "templates"},
    }


def _template(name: str, zone: str, group_max: int, registered_at: str) -> dict[str, Any]:
    node = gpu_node(name, pool=name, zone=zone, role=ROLE_AUTOSCALED)
    # The provider copies the template as is and only renames the copy, so a hostname label
    # would name the template on every node; better none than one shared by all.
    del node["metadata"]["labels"][HOSTNAME_LABEL]
    # A kubelet registers its node NotReady, with the not-ready taint, and the node lifecycle
    # controller lifts the taint once the node is Ready. Both are needed: without the taint the
    # scheduler binds pods to a node that is still booting, and without a Ready=False condition
    # the controller removes the taint (no condition maps to no taint). Upstream drops condition
    # taints from templates (utils/taints SanitizeTaints), so scale-up still counts it as fitting.
    node["spec"]["taints"].append(dict(NOT_READY_TAINT))
    node["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "simulated boot: the node is not up yet",
            "lastHeartbeatTime": registered_at,
            "lastTransitionTime": registered_at,
        }
    ]
    # Its own providerID ("kwok:<node>") replaces the GCE-style one on each node it creates.
    node["metadata"]["annotations"].update({MIN_COUNT: "0", MAX_COUNT: str(group_max)})
    return node


def templates(
    max_nodes: int, registered_at: str = "2026-01-01T00:00:00Z", region: str = REGION
) -> list[dict[str, Any]]:
    """One template Node per group of `region`; each group may grow to max_nodes (the quota caps
    the sum). `registered_at` dates the NotReady condition every copy starts with (RFC 3339)."""
    group_max = max(min(max_nodes, POOL_SIZE_LIMIT), 0)
    nodes = [_template(t4_group(z), z, group_max, registered_at) for z in zones_of(region)]
    l4 = _template(l4_group(region), l4_zone(region), group_max, registered_at)
    labels = l4["metadata"]["labels"]
    labels[ACCELERATOR_LABEL] = L4_TYPE
    labels["node.kubernetes.io/instance-type"] = "g2-standard-8"
    l4["status"]["allocatable"] = dict(L4_RESOURCES)
    l4["status"]["capacity"] = dict(L4_RESOURCES)
    return [*nodes, l4]


def configmaps(
    namespace: str, max_nodes: int, registered_at: str = "2026-01-01T00:00:00Z", region: str = REGION
) -> list[dict[str, Any]]:
    def cm(name: str, key: str, doc: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {key: yaml.safe_dump(doc, sort_keys=False)},
        }

    node_list = {"apiVersion": "v1", "kind": "List", "items": templates(max_nodes, registered_at, region)}
    return [cm(PROVIDER_CONFIG, "config", provider_config()), cm(TEMPLATES_CONFIG, "templates", node_list)]
