"""kwok node stages that make a new GPU node take time, as on GKE (pure, dicts out).

A node the cluster-autoscaler creates (a copy of its group's template, role `autoscaled`)
registers NotReady. The simulated cloud (`cloud.py`) stamps it with two absolute times sampled
from the dev cluster's delay specs; these stages play them:

1. `eops-node-boot`, at `eops.dev/boot-ready-at`: Ready, with `nvidia.com/gpu` allocatable 0
   (the VM is up, the driver is not installed yet);
2. `eops-node-gpu-driver`, at `eops.dev/gpu-driver-ready-at`: `nvidia.com/gpu` allocatable
   back to its capacity (GKE's driver installer finished; the device plugin advertises it).

Upstream counts a node that carries the GPU label but no allocatable GPU as not ready yet, as on
GKE, so it neither scales up again for the pods waiting on it nor schedules them there early.
A node without the boot stamp never turns Ready, which is why the stock `node-initialize` stage,
which readies any NotReady node at once, is kept away from autoscaled nodes. Other nodes (the static pool is
created Ready; nodes a test makes by hand) keep the stock behaviour.

Each stage also records an Event on the node (`EopsNodeBooted`, `EopsGpuDriverInstalled`), so
a run's node timeline can be read back from the API server.
"""

from __future__ import annotations

import copy
from typing import Any

from elasticityops.devcluster.nodes import GPU_RESOURCE, ROLE_AUTOSCALED, ROLE_LABEL

BOOT_AT = "eops.dev/boot-ready-at"
DRIVER_AT = "eops.dev/gpu-driver-ready-at"
STOCKOUT = "eops.dev/stockout"  # read by the autoscaler's patched kwok provider (patches/)
STOCKOUT_REASON = "EopsStockout"
BOOTED_REASON = "EopsNodeBooted"
DRIVER_REASON = "EopsGpuDriverInstalled"
STOCK_NODE_INITIALIZE = "node-initialize"

_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
_NOT_AUTOSCALED = {
    "key": f'.metadata.labels["{ROLE_LABEL}"]',
    "operator": "NotIn",
    "values": [ROLE_AUTOSCALED],
}
# A node still waiting for its GPU driver (Ready, allocatable 0). kwok's NotIn also matches a node
# without the resource at all, so nodes without GPUs keep the stock stages.
_NOT_WAITING_FOR_DRIVER = {
    "key": f'.status.allocatable["{GPU_RESOURCE}"]',
    "operator": "NotIn",
    "values": ["0"],
}

# The conditions a kubelet posts, turned on now (the stock node-initialize dates them at the
# node's creation, which would make a node that booted for minutes look Ready from the start).
_BOOT_TEMPLATE = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
{{ with NodePort }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ . }}
{{ end }}
allocatable:
{{ range $name, $value := .status.allocatable }}
  {{ $name | Quote }}: {{ if eq $name "GPU" }}"0"{{ else }}{{ $value | Quote }}{{ end }}
{{ end }}
phase: Running
""".replace('"GPU"', f'"{GPU_RESOURCE}"')

_DRIVER_TEMPLATE = """\
allocatable:
{{ $capacity := .status.capacity }}
{{ range $name, $value := .status.allocatable }}
  {{ $name | Quote }}: {{ if eq $name "GPU" }}{{ index $capacity "GPU" | Quote }}
    {{- else }}{{ $value | Quote }}{{ end }}
{{ end }}
""".replace('"GPU"', f'"{GPU_RESOURCE}"')


def _node_stage(
    name: str, match: list[dict[str, Any]], at: str, reason: str, message: str, template: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {
                "matchExpressions": [
                    _NOT_DELETING,
                    {"key": f'.metadata.annotations["{at}"]', "operator": "Exists"},
                    *match,
                ]
            },
            # An absolute time (RFC 3339) from the annotation: a node stamped late, or seen
            # again after a kwok restart, plays at the same moment, never a full delay later.
            "delay": {
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": f'.metadata.annotations["{at}"]'},
            },
            "next": {
                "event": {"type": "Normal", "reason": reason, "message": message},
                "statusTemplate": template,
            },
        },
    }


def boot_stage() -> dict[str, Any]:
    return _node_stage(
        "eops-node-boot",
        [{"key": _READY, "operator": "NotIn", "values": ["True"]}],
        BOOT_AT,
        BOOTED_REASON,
        "simulated boot finished: node Ready, GPU driver not installed yet",
        _BOOT_TEMPLATE,
    )


def driver_stage() -> dict[str, Any]:
    return _node_stage(
        "eops-node-gpu-driver",
        [
            {"key": _READY, "operator": "In", "values": ["True"]},
            {"key": f'.status.allocatable["{GPU_RESOURCE}"]', "operator": "In", "values": ["0"]},
        ],
        DRIVER_AT,
        DRIVER_REASON,
        f"simulated GPU driver installed: {GPU_RESOURCE} allocatable",
        _DRIVER_TEMPLATE,
    )


def node_stages(stock: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our two stages, and the stock ones kept off the nodes ours are waiting on: kwok plays
    one matching stage at random, so `node-initialize` must not match a NotReady autoscaled node
    (it would skip the boot), and no other stock node stage (`node-heartbeat-with-lease`, whose
    delay is 10-20 min) may match a Ready node waiting for its driver, or about half of the
    nodes of a burst get no GPU for that long (measured: 96 of 200 in
    bench/planner_calibration.py before this)."""
    out = [boot_stage(), driver_stage()]
    for doc in stock:
        kind = ((doc.get("spec") or {}).get("resourceRef") or {}).get("kind")
        name = doc.get("metadata", {}).get("name")
        if name == STOCK_NODE_INITIALIZE or kind == "Node":
            doc = copy.deepcopy(doc)
            exprs = doc["spec"].setdefault("selector", {}).setdefault("matchExpressions", [])
            exprs.append(dict(_NOT_AUTOSCALED if name == STOCK_NODE_INITIALIZE else _NOT_WAITING_FOR_DRIVER))
        out.append(doc)
    return out
