"""Simulated GKE T4 GPU nodes as plain Node manifests (pure functions, no I/O).

A node is labelled and tainted like an n1-standard-4 + 1x T4 node of a GKE GPU node pool;
kwok (selected by the `kwok.x-k8s.io/node: fake` annotation) marks it Ready and keeps it
alive. The dummy GCE-style providerID keeps the node-lifecycle controller from treating
it as a node without a cloud instance.
"""

from __future__ import annotations

from typing import Any

from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    GKE_GPU_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    ZONE_LABEL,
)

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
ROLE_LABEL = "eops.dev/role"  # "baseline" (static pool) or "autoscaled" (a node group's)
ROLE_BASELINE = "baseline"
ROLE_AUTOSCALED = "autoscaled"
POOL_LABEL = "cloud.google.com/gke-nodepool"
REGION = "us-central1"
# Regions a dev cluster's nodes can be in, with their zones as GCP names them: each worker of a
# MultiKueue set is a region of its own (multikueue.WORKER_REGIONS). One cluster is in REGION.
REGION_ZONES: dict[str, tuple[str, ...]] = {
    "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"),
    "us-east4": ("us-east4-a", "us-east4-b", "us-east4-c"),
    "europe-west4": ("europe-west4-a", "europe-west4-b", "europe-west4-c"),
    "us-west1": ("us-west1-a", "us-west1-b"),
}
ZONES: tuple[str, ...] = REGION_ZONES[REGION]


def zones_of(region: str) -> tuple[str, ...]:
    """The zones of `region` (ValueError naming the regions there are for another)."""
    if region not in REGION_ZONES:
        raise ValueError(f"region {region!r}: the dev cluster has {', '.join(REGION_ZONES)}")
    return REGION_ZONES[region]


def region_of(zone: str) -> str:
    """us-central1 for us-central1-a: GCP's zone names are the region's and a letter."""
    return zone.rsplit("-", 1)[0]


BASELINE_POOL = "baseline-t4"

GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
# n1-standard-4 with one T4, as the issue fixes it (GKE's real allocatable is a little lower).
NODE_RESOURCES = {
    "cpu": "4",
    "memory": "15Gi",
    GPU_RESOURCE: "1",
    "pods": "110",
    "ephemeral-storage": "100Gi",
}


_CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
)
# Every simulated node shares one InternalIP. Loopback, not kwok's usual 10.x address: the API
# server dials a node's address for pods/log and exec, and nothing of ours may send traffic off
# this machine (with --kubelet-preferred-address-types=InternalIP it never resolves a hostname).
NODE_IP = "127.0.0.1"


def node_ready(node: dict[str, Any]) -> bool:
    """Its Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def gpu_node(
    name: str, *, pool: str, zone: str, role: str, now: str = "", kubelet_port: int = 0
) -> dict[str, Any]:
    """The Node manifest of one simulated T4 node.

    With `now` (RFC 3339) the node is created already registered and Ready, as a kubelet
    posts it, so kwok only keeps it alive (lease, heartbeat) instead of first patching every
    node's status: at thousands of nodes that patch is most of the start-up time.
    """
    node = _manifest(name, pool=pool, zone=zone, role=role)
    if now:
        node["status"]["conditions"] = [
            {
                "type": t,
                "status": st,
                "reason": reason,
                "message": msg,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for t, st, reason, msg in _CONDITIONS
        ]
        node["status"]["addresses"] = [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "Hostname", "address": name},
        ]
        if kubelet_port:
            # Where the API server asks for pods/log: kwok's server, as our boot stage gives it
            # (kwok's NodePort) for the nodes the autoscaler adds.
            node["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    return node


def _manifest(name: str, *, pool: str, zone: str, role: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                HOSTNAME_LABEL: name,
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "type": "kwok",
                ACCELERATOR_LABEL: "nvidia-tesla-t4",
                GKE_GPU_LABEL: "true",
                POOL_LABEL: pool,
                ZONE_LABEL: zone,
                "topology.kubernetes.io/region": region_of(zone),
                "node.kubernetes.io/instance-type": "n1-standard-4",
                ROLE_LABEL: role,
            },
        },
        "spec": {
            "providerID": f"gce://eops-dev/{zone}/{name}",
            "taints": [dict(GPU_TAINT)],
        },
        "status": {
            "allocatable": dict(NODE_RESOURCES),
            "capacity": dict(NODE_RESOURCES),
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
                "containerRuntimeVersion": "kwok",
                "osImage": "Container-Optimized OS (simulated)",
                "kernelVersion": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
            "phase": "Running",
        },
    }


def baseline_node_name(index: int) -> str:
    return f"gke-eops-{BASELINE_POOL}-{index:05d}"


def baseline_zone(index: int, region: str = REGION) -> str:
    """The zone of the static pool's node `index`: round-robin over the region's zones."""
    zones = zones_of(region)
    return zones[index % len(zones)]


def baseline_nodes(count: int, start: int = 0, region: str = REGION) -> list[dict[str, Any]]:
    """`count` static-pool nodes, spread round-robin over the region's zones."""
    return [
        gpu_node(baseline_node_name(i), pool=BASELINE_POOL, zone=baseline_zone(i, region), role=ROLE_BASELINE)
        for i in range(start, start + count)
    ]
