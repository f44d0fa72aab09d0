"""The chart's Kueue objects (`kueue.queues.create`): what `eops render kueue` renders for the
release's namespace and `kueue.localQueue`, as a template over the chart's values.

The objects are the builder's own (ops/kueue.py: `kueue_manifests`), rendered once for probe
inputs whose names and class are then replaced by the values that stand for them; only the
per-GPU-type parts (one ResourceFlavor and one quota entry per type) are repeated over the
budget, which the chart parses from `kueue.queues.gpuBudget` (`eops serve --gpu-budget`'s
`TYPE=N,TYPE=N`). A test holds `helm template` to `eops render kueue` under several inputs.
Pure: nodes and text, nothing written here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from elasticityops.backends.kubernetes.deploy import KUEUE_ON, LOCAL_QUEUE, NAMESPACE
from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.backends.kubernetes.template import Condition, Each, Node, Value, When
from elasticityops.domain.functions import KNOWN_GPU_TYPES
from elasticityops.ops.kueue import (
    DWS,
    NO_PROVISIONING,
    PROVISIONING_CLASSES,
    KueueInputs,
    kueue_manifests,
    machine_per_gpu,
)


@dataclass(frozen=True)
class QueueValues:
    """What the `kueue.queues` values stand for: `eops render kueue`'s inputs (the namespace and
    the LocalQueue are the release's namespace and `kueue.localQueue`) and whether to render."""

    create: bool = False
    inputs: KueueInputs = field(default_factory=lambda: KueueInputs(gpu_budget=""))


_TYPES = "|".join(KNOWN_GPU_TYPES)
_DNS_LABEL = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"

CREATE = Value(
    "kueue.queues.create",
    lambda o: o.create,
    about="With kueue.enabled, also render the Kueue objects of `eops render kueue` for this "
    "namespace and kueue.localQueue: a ResourceFlavor per GPU type, the ClusterQueue, the "
    "LocalQueue, the WorkloadPriorityClasses and the ProvisioningRequest admission check (the "
    "cluster needs Kueue's CRDs; ResourceFlavors, ClusterQueue and WorkloadPriorityClasses are "
    "cluster-wide: one release per cluster creates them).",
)
GPU_BUDGET = Value(
    "kueue.queues.gpuBudget",
    lambda o: o.inputs.gpu_budget,
    about="The ClusterQueue's GPU quota per type, required with kueue.queues.create: TYPE=N,TYPE=N "
    "as eops serve --gpu-budget writes it (e.g. nvidia-tesla-t4=8,nvidia-l4=2; in --set, escape "
    "the comma: \\,) (eops render kueue --gpu-budget).",
    schema=(("pattern", f"^((({_TYPES})=[0-9]+)(,({_TYPES})=[0-9]+)*)?$"),),
)
CLUSTER_QUEUE = Value(
    "kueue.queues.clusterQueue",
    lambda o: o.inputs.cluster_queue,
    knob="cluster-queue",
    schema=(("pattern", _DNS_LABEL),),
)
PROVISIONING_CLASS = Value(
    "kueue.queues.provisioningClass",
    lambda o: o.inputs.provisioning_class,
    knob="provisioning-class",
    schema=(("enum", [*PROVISIONING_CLASSES, NO_PROVISIONING]),),
)
QUEUE_VALUES: tuple[Value, ...] = (CREATE, GPU_BUDGET, CLUSTER_QUEUE, PROVISIONING_CLASS)
"""The chart's values of the Kueue objects, after the deploy template's (`CHART_VALUES`)."""

PROVISIONED = Condition(
    lambda o: o.inputs.provisioning_class != NO_PROVISIONING,
    f'ne {PROVISIONING_CLASS.expression} "{NO_PROVISIONING}"',
    (PROVISIONING_CLASS,),
)

# The entry of the budget that `Each` repeats a part for, as template variables.
_GPU_TYPE = Value(None, lambda o: "", helm="$type")
_GPUS = Value(None, lambda o: 0, helm="$gpus")
_CPUS = Value(None, lambda o: 0, helm="mul $gpus (index $shapes $type 0)")
_MEMORY = Value(None, lambda o: "", helm='printf "%dGi" (mul $gpus (index $shapes $type 1))')
_EACH_TYPE = "$type, $gpus := $quota"  # Go ranges over a map in key order, as the builder sorts

# Probe inputs: DNS labels that appear nowhere else in the objects, to be replaced.
_PROBE_TYPE = KNOWN_GPU_TYPES[0]
_PROBE = KueueInputs(
    gpu_budget=f"{_PROBE_TYPE}=1",
    namespace="probe-namespace",
    local_queue="probe-local-queue",
    cluster_queue="probe-cluster-queue",
    provisioning_class=DWS,
)


def _holes(node: Any, holes: dict[str, Node]) -> Node:
    """`node` with every string that is a key of `holes` replaced by its node."""
    if isinstance(node, str):
        return holes.get(node, node)
    if isinstance(node, dict):
        return {key: _holes(value, holes) for key, value in node.items()}
    if isinstance(node, list):
        return [_holes(item, holes) for item in node]
    return node


def _flavor_quota(probe: dict[str, Any]) -> Node:
    """The ClusterQueue's quota entry of one GPU type, its numbers those of the budget's entry."""
    per_resource = {GPU_RESOURCE: _GPUS, "cpu": _CPUS, "memory": _MEMORY}
    return {
        **probe,
        "name": _GPU_TYPE,
        "resources": [{**r, "nominalQuota": per_resource[r["name"]]} for r in probe["resources"]],
    }


def queue_template() -> list[Node]:
    """The objects of `eops render kueue`, in its order, over the chart's values and the
    variables `queue_prelude` sets."""
    holes: dict[str, Node] = {
        _PROBE.namespace: NAMESPACE,
        _PROBE.local_queue: LOCAL_QUEUE,
        _PROBE.cluster_queue: CLUSTER_QUEUE,
        DWS: PROVISIONING_CLASS,
    }
    nodes: list[Node] = []
    for manifest in kueue_manifests(_PROBE):
        kind = manifest["kind"]
        if kind == "ResourceFlavor":
            nodes.append(Each(_EACH_TYPE, _holes(manifest, {_PROBE_TYPE: _GPU_TYPE})))
            continue
        node: dict[str, Any] = _holes(manifest, holes)
        if kind in ("ProvisioningRequestConfig", "AdmissionCheck"):
            nodes.append(When(PROVISIONED, node))
            continue
        if kind == "ClusterQueue":
            spec = node["spec"]
            [group] = spec["resourceGroups"]
            [probe_quota] = group["flavors"]
            group["flavors"] = [Each(_EACH_TYPE, _flavor_quota(probe_quota))]
            spec["admissionChecksStrategy"] = When(PROVISIONED, spec["admissionChecksStrategy"])
        nodes.append(node)
    return nodes


def _fail(test: str, message: str) -> list[str]:
    return [f"{{{{- if {test} }}}}", f"{{{{- fail {json.dumps(message)} }}}}", "{{- end }}"]


def queue_prelude() -> list[str]:
    """Go template lines, inside `if kueue.queues.create`, that refuse what `eops render kueue`
    refuses and set `$quota` (GPU type -> GPUs, from the budget) and `$shapes` (GPU type ->
    vCPUs and GB of memory per GPU, from the builder's machines)."""
    budget = GPU_BUDGET.expression
    shapes = " ".join(
        f'"{kind}" (list {" ".join(map(str, machine_per_gpu(kind)))})' for kind in KNOWN_GPU_TYPES
    )
    return [
        *_fail(
            f"not {KUEUE_ON.expression}",
            f"{CREATE.path} renders the Kueue objects of a gateway with {KUEUE_ON.path}: set "
            f"{KUEUE_ON.path}=true too",
        ),
        *_fail(
            f"not {budget}",
            f"{GPU_BUDGET.path} is required with {CREATE.path}: the ClusterQueue's GPU quota per "
            "type, e.g. nvidia-tesla-t4=8,nvidia-l4=2 (Kueue's quota is per flavor)",
        ),
        "{{- $quota := dict }}",
        f'{{{{- range $item := splitList "," (toString {budget}) }}}}',
        '{{- $pair := splitList "=" $item }}',
        "{{- $_ := set $quota (first $pair) (int (last $pair)) }}",
        "{{- end }}",
        *_fail(
            f'ne (len $quota) (len (splitList "," (toString {budget})))',
            f"{GPU_BUDGET.path} names a GPU type twice: name each type once",
        ),
        f"{{{{- $shapes := dict {shapes} }}}}",
    ]


def queue_condition() -> str:
    return CREATE.expression


PRELUDE_VALUES: tuple[Value, ...] = (CREATE, KUEUE_ON, GPU_BUDGET)
"""What `queue_condition` and `queue_prelude` read (the template's nodes read the rest)."""
