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

Heartbeats are ours too. kwok runs without node Leases (issue 14: with them, kwok 0.8.0 may skip
a pod for good when its lease cache lags; docs/dev-cluster.md), so a node stays Ready only by
posting status, as a kubelet without leases does: `eops-node-heartbeat` renews every Ready
node's conditions every `heartbeat_seconds` (transition times kept). A node waiting for its
driver must keep posting too, but kwok plays one matching stage at random, so the wait is split
by time instead: while the driver is more than one heartbeat away `eops-node-heartbeat-driver-wait`
matches (and beats), within one heartbeat only `eops-node-gpu-driver` does (and fires on time).
"""

from __future__ import annotations

import copy
from typing import Any

from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL

BOOT_AT = "eops.dev/boot-ready-at"
DRIVER_AT = "eops.dev/gpu-driver-ready-at"
STOCKOUT = "eops.dev/stockout"  # read by the autoscaler's patched kwok provider (patches/)
STOCKOUT_REASON = "EopsStockout"
BOOTED_REASON = "EopsNodeBooted"
DRIVER_REASON = "EopsGpuDriverInstalled"
STOCK_NODE_INITIALIZE = "node-initialize"
STOCK_NODE_HEARTBEAT = "node-heartbeat-with-lease"  # replaced by ours: it needs kwok's leases
DEFAULT_HEARTBEAT_SECONDS = 60

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


# kubelet-style heartbeat: every condition renewed now, each keeping its transition time (the
# stock heartbeat dates them at the node's creation, which would make a node that booted for
# minutes look Ready since it was created).
_HEARTBEAT_TEMPLATE = """\
{{ $now := Now }}
conditions:
{{ range .status.conditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ .lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
"""


def _driver_far(heartbeat_seconds: int) -> dict[str, Any]:
    """True while the driver stamp is more than one heartbeat away. gojq's `now` is read each
    time kwok matches; the stamp is cut to the second for `fromdate`. `try` so a malformed stamp
    answers false rather than an error, which would make kwok match no stage at all."""
    expr = (
        f'try (((.metadata.annotations["{DRIVER_AT}"] | .[0:19] + "Z" | fromdate) - now)'
        f" > {heartbeat_seconds}) catch false"
    )
    return {"key": expr, "operator": "In", "values": ["true"]}


def _driver_near(heartbeat_seconds: int) -> dict[str, Any]:
    return {**_driver_far(heartbeat_seconds), "values": ["false"]}


def _heartbeat_delay(heartbeat_seconds: int) -> dict[str, Any]:
    # kwok's jitter is an upper bound that must exceed the delay (one <= the delay replaces it):
    # beats land in [H, 1.1 H], spreading thousands of nodes created at once.
    ms = heartbeat_seconds * 1000
    return {"durationMilliseconds": ms, "jitterDurationMilliseconds": ms + ms // 10}


def _stage(
    name: str, match: list[dict[str, Any]], delay: dict[str, Any], next_: dict[str, Any]
) -> dict[str, Any]:
    """A node stage of ours; never for a node being deleted."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchExpressions": [_NOT_DELETING, *match]},
            "delay": delay,
            "next": next_,
        },
    }


def _heartbeat_stage(name: str, match: list[dict[str, Any]], heartbeat_seconds: int) -> dict[str, Any]:
    return _stage(
        name,
        [{"key": _READY, "operator": "In", "values": ["True"]}, *match],
        _heartbeat_delay(heartbeat_seconds),
        {"statusTemplate": _HEARTBEAT_TEMPLATE},
    )


def heartbeat_stages(heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS) -> list[dict[str, Any]]:
    """Heartbeats for Ready nodes: one for nodes not waiting for a driver, one for those whose
    driver is more than a heartbeat away (exclusive with `driver_stage` by the same test)."""
    waiting = {"key": f'.status.allocatable["{GPU_RESOURCE}"]', "operator": "In", "values": ["0"]}
    return [
        _heartbeat_stage("eops-node-heartbeat", [dict(_NOT_WAITING_FOR_DRIVER)], heartbeat_seconds),
        _heartbeat_stage(
            "eops-node-heartbeat-driver-wait",
            [
                waiting,
                {"key": f'.metadata.annotations["{DRIVER_AT}"]', "operator": "Exists"},
                _driver_far(heartbeat_seconds),
            ],
            heartbeat_seconds,
        ),
    ]


def _node_stage(
    name: str, match: list[dict[str, Any]], at: str, reason: str, message: str, template: str
) -> dict[str, Any]:
    return _stage(
        name,
        [{"key": f'.metadata.annotations["{at}"]', "operator": "Exists"}, *match],
        # An absolute time (RFC 3339) from the annotation: a node stamped late, or seen
        # again after a kwok restart, plays at the same moment, never a full delay later.
        {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": f'.metadata.annotations["{at}"]'}},
        {"event": {"type": "Normal", "reason": reason, "message": message}, "statusTemplate": template},
    )


def boot_stage() -> dict[str, Any]:
    return _node_stage(
        "eops-node-boot",
        [{"key": _READY, "operator": "NotIn", "values": ["True"]}],
        BOOT_AT,
        BOOTED_REASON,
        "simulated boot finished: node Ready, GPU driver not installed yet",
        _BOOT_TEMPLATE,
    )


def driver_stage(heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS) -> dict[str, Any]:
    return _node_stage(
        "eops-node-gpu-driver",
        [
            {"key": _READY, "operator": "In", "values": ["True"]},
            {"key": f'.status.allocatable["{GPU_RESOURCE}"]', "operator": "In", "values": ["0"]},
            _driver_near(heartbeat_seconds),
        ],
        DRIVER_AT,
        DRIVER_REASON,
        f"simulated GPU driver installed: {GPU_RESOURCE} allocatable",
        _DRIVER_TEMPLATE,
    )


def node_stages(
    stock: list[dict[str, Any]], heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS
) -> list[dict[str, Any]]:
    """Our stages (boot, driver, heartbeats), and the stock ones kept off the nodes ours are
    waiting on: kwok plays one matching stage at random, so `node-initialize` must not match a
    NotReady autoscaled node (it would skip the boot), and no other stock node stage may match a
    Ready node waiting for its driver, or about half of the nodes of a burst get no GPU until
    that stage's delay (measured with the stock 10-20 min `node-heartbeat-with-lease`: 96 of 200
    in bench/planner_calibration.py). The stock heartbeat itself is dropped for ours."""
    out = [boot_stage(), driver_stage(heartbeat_seconds), *heartbeat_stages(heartbeat_seconds)]
    for doc in stock:
        kind = ((doc.get("spec") or {}).get("resourceRef") or {}).get("kind")
        name = doc.get("metadata", {}).get("name")
        if name == STOCK_NODE_HEARTBEAT:
            continue
        if name == STOCK_NODE_INITIALIZE or kind == "Node":
            doc = copy.deepcopy(doc)
            exprs = doc["spec"].setdefault("selector", {}).setdefault("matchExpressions", [])
            exprs.append(dict(_NOT_AUTOSCALED if name == STOCK_NODE_INITIALIZE else _NOT_WAITING_FOR_DRIVER))
        out.append(doc)
    return out
