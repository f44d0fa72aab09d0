"""Render a GKE cluster set up for one-request-one-GPU-node functions, sized from the peak.

`render_gke(GkeInputs) -> GkeRender` is pure: it returns the script text, the manifests as data
and the sizing with its reasons; the CLI writes the files. What it encodes (each rule is stated
again in the rendered output, so the reviewer sees why):

- Node auto-provisioning (NAP) creates and deletes GPU node pools by itself. Never one node pool
  per request: a cluster's node pool count is limited and a pool creation is minutes slow.
- GPU limit = peak x (1 + margin), rounded up to the next step of 5 in the peak's second
  significant digit (4,000 -> 4,400 -> 4,500; 60 -> 66 -> 70). The same number is the GPU quota
  to request, because NAP's limit is useless above the project's quota.
- CPU / memory NAP limits count every pool (system + baseline + auto-provisioned), so they are
  sized for the GPU limit's worth of GPU machines plus the system pool; they are what really caps
  the node count when fallbacks (L4) have limits of their own.
- At most 1,000 nodes per node pool per zone: the peak needs ceil(peak / 1,000) pool-zones.
- Pod and node IP ranges are sized for the limit (the default /14 pod range holds only 1,024
  nodes at 110 pods per node).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import knob
from elasticityops.ops.priorities import priority_class_manifests
from elasticityops.ops.yaml_docs import Document, Manifest, comment_block, dump_documents

NODES_PER_POOL_PER_ZONE = 1_000
# GPU nodes run one job pod plus a handful of DaemonSets; 32 pods per node gives each node a /26
# and keeps the pod range small enough for thousands of nodes.
MAX_PODS_PER_NODE = 32
SYSTEM_MACHINE_TYPE = "e2-standard-4"
SYSTEM_NODES_PER_ZONE = 1
SYSTEM_NODE_VCPUS = 4
SYSTEM_NODE_MEMORY_GB = 16
COMPUTE_CLASS_NAME = "eops-gpu"

_PROJECT_RE = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_CLUSTER_RE = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_IMAGE_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class GpuShape:
    """A GPU and the machine that carries one of it."""

    gpu_type: str
    machine_type: str
    vcpus: int
    memory_gb: int
    quota_metric: str
    spot_quota_metric: str


GPU_SHAPES: dict[str, GpuShape] = {
    "nvidia-tesla-t4": GpuShape(
        "nvidia-tesla-t4", "n1-standard-4", 4, 15, "NVIDIA_T4_GPUS", "PREEMPTIBLE_NVIDIA_T4_GPUS"
    ),
    "nvidia-l4": GpuShape(
        "nvidia-l4", "g2-standard-4", 4, 16, "NVIDIA_L4_GPUS", "PREEMPTIBLE_NVIDIA_L4_GPUS"
    ),
}

# Machine types that must never carry a GPU here, and why (the answer shown to the user).
REFUSED_MACHINE_TYPES: dict[str, str] = {
    "n1-standard-1": (
        "n1-standard-1 has 1 vCPU and 3.75 GB: data loading, decoding and the CUDA host threads starve the "
        "T4, which then idles; use n1-standard-4 (4 vCPU, 15 GB) for one T4"
    ),
    "n1-standard-2": (
        "n1-standard-2 (2 vCPU, 7.5 GB) still leaves a T4 waiting on the host for typical inference "
        "pre-processing; use n1-standard-4"
    ),
}


def _gpu_or_none(raw: object) -> str | None:
    text = "" if raw is None else str(raw).strip()
    return None if text in ("", "none") else text


@dataclass(frozen=True)
class GkeInputs:
    """What `eops render gke` renders; each knob is one of its flags (elasticityops/knobs.py).
    The limits are validate()'s, whose messages say what to pass instead."""

    project: str
    region: str
    zones: tuple[str, ...]
    peak: int
    baseline: int = knob(60, unit="nodes", help="Always-on GPU nodes for usual traffic (part of the peak).")
    spot: bool = knob(False, off=None, help="Prefer spot VMs, fall back to on-demand.")
    gpu_type: str = knob("nvidia-tesla-t4", help=f"GPU model: {', '.join(GPU_SHAPES)}.")
    machine_type: str | None = knob(
        None,
        shown="n1-standard-4 for T4, g2-standard-4 for L4",
        help="Machine for one GPU; never n1-standard-1.",
    )
    fallback_gpu_type: str | None = knob(
        "nvidia-l4", parse=_gpu_or_none, help="GPU model to fall back to, or none."
    )
    cluster: str = knob("eops", help="Cluster name.")
    margin_pct: int = knob(
        10, flag="margin", unit="percent", help="Margin above the peak for GPU limits and quota."
    )
    preload_disk_image: str | None = knob(
        None, shown="none", help="Disk image with the function images, for a secondary boot disk."
    )
    release_channel: str = knob("regular", help="GKE release channel.")

    @property
    def machine(self) -> str:
        """`machine_type`, else the machine that carries one `gpu_type` (n1-standard-4 for one
        that is not known; validate() refuses that GPU anyway)."""
        if self.machine_type is not None:
            return self.machine_type
        shape = GPU_SHAPES.get(self.gpu_type)
        return shape.machine_type if shape is not None else "n1-standard-4"


@dataclass(frozen=True)
class GkeSizing:
    """Every number in the render and the rule that produced it."""

    gpu_limit: int
    fallback_gpu_limit: int
    pool_zones_needed: int
    pool_zones_available: int
    baseline_per_zone: int
    baseline_total: int
    system_nodes: int
    max_nodes: int
    nap_cpu_limit: int
    nap_memory_limit_gb: int
    pod_range_prefix: int
    node_subnet_prefix: int
    quota: dict[str, int]
    rules: tuple[str, ...]


@dataclass(frozen=True)
class GkeRender:
    script: str
    files: dict[str, str]
    manifests: list[Manifest]
    nap_config: dict[str, Any]
    sizing: GkeSizing
    warnings: tuple[str, ...] = field(default_factory=tuple)


def gpu_limit_for_peak(peak: int, margin_pct: int = 10) -> int:
    """peak x (1 + margin), rounded up to a step of 5 in the peak's second significant digit."""
    wanted = math.ceil(peak * (100 + margin_pct) / 100)
    step = 5 * 10 ** max(0, len(str(peak)) - 2)
    return int(math.ceil(wanted / step) * step)


def pool_zones_needed(peak: int) -> int:
    return math.ceil(peak / NODES_PER_POOL_PER_ZONE)


def _prefix_for(count: int, reserved: int = 0) -> int:
    """Smallest IPv4 prefix whose block holds `count + reserved` addresses."""
    return 32 - math.ceil(math.log2(count + reserved))


def validate(inputs: GkeInputs) -> None:
    problems: list[FieldProblem] = []
    if not _PROJECT_RE.match(inputs.project):
        problems.append(
            FieldProblem(
                "project",
                f"{inputs.project!r} is not a GCP project id",
                "use 6-30 lower-case letters, digits or hyphens, starting with a letter",
            )
        )
    if not _REGION_RE.match(inputs.region):
        problems.append(
            FieldProblem("region", f"{inputs.region!r} is not a GCP region", "write it like us-central1")
        )
    if not inputs.zones:
        problems.append(
            FieldProblem(
                "zones",
                "no zone given",
                "list the region's zones that offer the GPU, e.g. a,b,c or us-central1-a,us-central1-b",
            )
        )
    for zone in inputs.zones:
        if not re.match(rf"^{re.escape(inputs.region)}-[a-z]$", zone):
            problems.append(
                FieldProblem(
                    "zones",
                    f"{zone!r} is not a zone of {inputs.region}",
                    f"write zones like {inputs.region}-a, or just the letters a,b,c",
                )
            )
    if len(set(inputs.zones)) != len(inputs.zones):
        problems.append(FieldProblem("zones", "a zone is listed twice", "list each zone once"))
    if inputs.peak < 1:
        problems.append(
            FieldProblem(
                "peak",
                f"peak must be at least 1 GPU node, got {inputs.peak}",
                "pass the most GPU nodes you expect at once, e.g. --peak 4000",
            )
        )
    if inputs.baseline < 0:
        problems.append(
            FieldProblem(
                "baseline",
                f"baseline cannot be negative, got {inputs.baseline}",
                "use 0 for no always-on pool",
            )
        )
    elif inputs.baseline > inputs.peak >= 1:
        problems.append(
            FieldProblem(
                "baseline",
                f"baseline {inputs.baseline} is above the peak {inputs.peak}",
                "the baseline is part of the peak: lower it or raise --peak",
            )
        )
    if not 0 <= inputs.margin_pct <= 100:
        problems.append(
            FieldProblem(
                "margin",
                f"margin {inputs.margin_pct}% is outside 0-100",
                "10 (the default) covers retries and nodes still draining",
            )
        )
    if inputs.gpu_type not in GPU_SHAPES:
        problems.append(
            FieldProblem(
                "gpu-type",
                f"{inputs.gpu_type!r} is not supported by this render",
                f"use one of: {', '.join(GPU_SHAPES)}",
            )
        )
    if inputs.fallback_gpu_type is not None and (
        inputs.fallback_gpu_type not in GPU_SHAPES or inputs.fallback_gpu_type == inputs.gpu_type
    ):
        problems.append(
            FieldProblem(
                "fallback-gpu-type",
                f"{inputs.fallback_gpu_type!r} cannot be the fallback",
                f"use one of {', '.join(t for t in GPU_SHAPES if t != inputs.gpu_type)}, or none",
            )
        )
    if inputs.machine in REFUSED_MACHINE_TYPES:
        problems.append(
            FieldProblem(
                "machine-type",
                REFUSED_MACHINE_TYPES[inputs.machine],
                "pass --machine-type n1-standard-4",
            )
        )
    elif inputs.gpu_type in GPU_SHAPES:
        shape = GPU_SHAPES[inputs.gpu_type]
        family = shape.machine_type.split("-")[0]
        if not inputs.machine.startswith(f"{family}-"):
            problems.append(
                FieldProblem(
                    "machine-type",
                    f"{inputs.gpu_type} attaches only to {family} machines, not {inputs.machine}",
                    f"pass --machine-type {shape.machine_type}",
                )
            )
    if not _CLUSTER_RE.match(inputs.cluster):
        problems.append(
            FieldProblem(
                "cluster",
                f"{inputs.cluster!r} is not a valid cluster name",
                "use up to 40 lower-case letters, digits or hyphens, starting with a letter",
            )
        )
    if inputs.preload_disk_image is not None and not _IMAGE_RE.match(inputs.preload_disk_image):
        problems.append(
            FieldProblem(
                "preload-disk-image",
                f"{inputs.preload_disk_image!r} is not a Compute Engine image name",
                "pass the image built by gke-disk-image-builder, e.g. eops-fn-images-v3",
            )
        )
    if inputs.release_channel not in ("rapid", "regular", "stable"):
        problems.append(
            FieldProblem(
                "release-channel",
                f"unknown channel {inputs.release_channel!r}",
                "use rapid, regular or stable",
            )
        )
    if problems:
        raise InvalidInput(problems=problems)


def size(inputs: GkeInputs) -> GkeSizing:
    shape = GPU_SHAPES[inputs.gpu_type]
    gpu_limit = gpu_limit_for_peak(inputs.peak, inputs.margin_pct)
    zones = len(inputs.zones)
    # The fallback GPU may absorb a stockout of the primary, not the whole peak on top of it:
    # the CPU limit below caps both together at gpu_limit machines.
    fallback_limit = gpu_limit if inputs.fallback_gpu_type else 0
    system_nodes = SYSTEM_NODES_PER_ZONE * zones
    baseline_per_zone = math.ceil(inputs.baseline / zones) if inputs.baseline else 0
    baseline_total = baseline_per_zone * zones
    max_nodes = gpu_limit + system_nodes
    biggest = max(
        [GPU_SHAPES[inputs.gpu_type]]
        + ([GPU_SHAPES[inputs.fallback_gpu_type]] if inputs.fallback_gpu_type else []),
        key=lambda s: s.memory_gb,
    )
    nap_cpu = gpu_limit * max(shape.vcpus, biggest.vcpus) + system_nodes * SYSTEM_NODE_VCPUS
    nap_memory = gpu_limit * biggest.memory_gb + system_nodes * SYSTEM_NODE_MEMORY_GB
    node_pod_prefix = _prefix_for(2 * MAX_PODS_PER_NODE)  # GKE gives each node twice max-pods addresses
    pod_range_prefix = node_pod_prefix - math.ceil(math.log2(max_nodes))
    node_subnet_prefix = _prefix_for(max_nodes, reserved=4)  # GCP reserves 4 addresses per subnet
    # With --spot the ComputeClass falls back from spot to on-demand (and the baseline pool is
    # on-demand), so both metrics must cover the limit: the fallback is useless without quota.
    quota = {shape.quota_metric: gpu_limit}
    if inputs.spot:
        quota[shape.spot_quota_metric] = gpu_limit
    if inputs.fallback_gpu_type:
        fb = GPU_SHAPES[inputs.fallback_gpu_type]
        quota[fb.quota_metric] = fallback_limit
        if inputs.spot:
            quota[fb.spot_quota_metric] = fallback_limit
    if shape.machine_type.startswith("n1-"):
        # N1 and the E2 system pool both count against the regional CPUS quota.
        quota["CPUS"] = gpu_limit * shape.vcpus + system_nodes * SYSTEM_NODE_VCPUS
    rules = (
        f"GPU limit {gpu_limit} = {inputs.peak} peak x {100 + inputs.margin_pct}%, rounded up to a step of "
        f"{5 * 10 ** max(0, len(str(inputs.peak)) - 2)}: margin for retried requests and nodes still "
        "draining.",
        f"NAP CPU limit {nap_cpu} vCPU / memory {nap_memory} GB = {gpu_limit} GPU machines + {system_nodes} "
        "system nodes: NAP limits count every node pool, and the CPU limit is what caps primary + fallback "
        "together.",
        f"Pool-zones: {inputs.peak} nodes need {pool_zones_needed(inputs.peak)} at "
        f"{NODES_PER_POOL_PER_ZONE} nodes per node pool per zone; {zones} zone(s) give {zones} per "
        "auto-provisioned pool.",
        f"Baseline: {inputs.baseline} nodes over {zones} zone(s) = {baseline_per_zone} per zone "
        f"({baseline_total} in total).",
        f"Pod range /{pod_range_prefix} = {max_nodes} nodes x /{node_pod_prefix} ({MAX_PODS_PER_NODE} pods "
        f"per node); node subnet /{node_subnet_prefix} for {max_nodes} nodes + 4 reserved addresses.",
    )
    return GkeSizing(
        gpu_limit=gpu_limit,
        fallback_gpu_limit=fallback_limit,
        pool_zones_needed=pool_zones_needed(inputs.peak),
        pool_zones_available=zones,
        baseline_per_zone=baseline_per_zone,
        baseline_total=baseline_total,
        system_nodes=system_nodes,
        max_nodes=max_nodes,
        nap_cpu_limit=nap_cpu,
        nap_memory_limit_gb=nap_memory,
        pod_range_prefix=pod_range_prefix,
        node_subnet_prefix=node_subnet_prefix,
        quota=quota,
        rules=rules,
    )


def warnings_for(inputs: GkeInputs, sizing: GkeSizing) -> tuple[str, ...]:
    found: list[str] = []
    if sizing.pool_zones_available < sizing.pool_zones_needed:
        found.append(
            f"{inputs.peak} nodes need {sizing.pool_zones_needed} pool-zones ({NODES_PER_POOL_PER_ZONE} "
            f"nodes per node pool per zone) but {sizing.pool_zones_available} zone(s) were given: one "
            f"auto-provisioned pool tops out at {sizing.pool_zones_available * NODES_PER_POOL_PER_ZONE}. "
            "Add zones (--zones) or rely on the ComputeClass rules, each of which NAP turns into pools of "
            "its own."
        )
    if inputs.peak > NODES_PER_POOL_PER_ZONE:
        found.append(
            "The upstream cluster autoscaler is performance-tested to 1,000 nodes and GKE supports up to "
            "5,000 with autoscaling on a regional cluster: rehearse the peak (eops plan) before relying on "
            "it."
        )
    if inputs.baseline and inputs.baseline % len(inputs.zones):
        found.append(
            f"Baseline {inputs.baseline} does not divide over {len(inputs.zones)} zones: the pool gets "
            f"{sizing.baseline_per_zone} per zone, {sizing.baseline_total} in total."
        )
    return tuple(found)


def compute_class(inputs: GkeInputs) -> Manifest:
    """Ordered fallbacks: primary GPU spot -> on-demand, then the fallback GPU the same way."""
    priorities: list[dict[str, Any]] = []
    gpu_types = [inputs.gpu_type] + ([inputs.fallback_gpu_type] if inputs.fallback_gpu_type else [])
    for gpu_type in gpu_types:
        shape = GPU_SHAPES[gpu_type]
        machine = inputs.machine if gpu_type == inputs.gpu_type else shape.machine_type
        for spot in [True, False] if inputs.spot else [False]:
            rule: dict[str, Any] = {
                "machineType": machine,
                "spot": spot,
                "gpu": {"type": gpu_type, "count": 1, "driverVersion": "latest"},
                "location": {"zones": list(inputs.zones)},
            }
            if inputs.preload_disk_image:
                rule["storage"] = {
                    "secondaryBootDisks": [
                        {
                            "diskImageName": inputs.preload_disk_image,
                            "project": inputs.project,
                            "mode": "CONTAINER_IMAGE_CACHE",
                        }
                    ]
                }
            priorities.append(rule)
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": COMPUTE_CLASS_NAME, "labels": {"app.kubernetes.io/part-of": "elasticityops"}},
        "spec": {
            "priorities": priorities,
            "nodePoolAutoCreation": {"enabled": True},
            # Move work back to the cheaper, earlier rule when it has capacity again.
            "activeMigration": {"optimizeRulePriority": True},
            # DoNotScaleUp: a pod that fits no rule waits visibly Pending instead of landing on
            # an unplanned, unbudgeted machine shape.
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def nap_config(inputs: GkeInputs, sizing: GkeSizing) -> dict[str, Any]:
    """The file `gcloud container clusters create --autoprovisioning-config-file` reads."""
    limits: list[dict[str, Any]] = [
        {"resourceType": "cpu", "minimum": 0, "maximum": sizing.nap_cpu_limit},
        {"resourceType": "memory", "minimum": 0, "maximum": sizing.nap_memory_limit_gb},
        {"resourceType": inputs.gpu_type, "minimum": 0, "maximum": sizing.gpu_limit},
    ]
    if inputs.fallback_gpu_type:
        limits.append(
            {"resourceType": inputs.fallback_gpu_type, "minimum": 0, "maximum": sizing.fallback_gpu_limit}
        )
    return {
        "resourceLimits": limits,
        "autoprovisioningLocations": list(inputs.zones),
        "management": {"autoRepair": True, "autoUpgrade": True},
    }


def _q(value: str) -> str:
    return shlex.quote(value)


def _script(inputs: GkeInputs, sizing: GkeSizing, warnings: tuple[str, ...]) -> str:
    shape = GPU_SHAPES[inputs.gpu_type]
    zones_csv = ",".join(inputs.zones)
    quota_lines = "\n".join(f"need_quota {metric} {amount}" for metric, amount in sizing.quota.items())
    header = [
        "Rendered by `eops render gke`: review it, then run it once per cluster.",
        f"Inputs: project={inputs.project} region={inputs.region} zones={zones_csv} peak={inputs.peak} "
        f"baseline={inputs.baseline} spot={inputs.spot} gpu={inputs.gpu_type} machine={inputs.machine} "
        f"fallback={inputs.fallback_gpu_type or 'none'}",
        "",
        "Sizing rules:",
        *[f"  - {rule}" for rule in sizing.rules],
        "",
        "No per-request node pools, ever: node auto-provisioning creates and deletes GPU pools itself;",
        "a pool per request hits the node-pool limit and costs minutes per request.",
    ]
    if warnings:
        header += ["", "WARNINGS:", *[f"  ! {w}" for w in warnings]]
    baseline_section = ""
    if inputs.baseline:
        secondary = ""
        if inputs.preload_disk_image:
            image = f"projects/{inputs.project}/global/images/{inputs.preload_disk_image}"
            secondary = f"  --secondary-boot-disk=disk-image={image},mode=CONTAINER_IMAGE_CACHE \\\n"
        baseline_section = f"""
# 4. The always-on baseline pool: {sizing.baseline_total} x {inputs.machine} + 1 {inputs.gpu_type}
#    ({sizing.baseline_per_zone} per zone). Usual traffic never waits for a cold node; NAP handles
#    everything above it. On-demand even with --spot, so the baseline does not vanish at 30 s notice.
#    gpu-driver-version=latest makes GKE install the NVIDIA driver; without it the node never
#    exposes nvidia.com/gpu. {inputs.machine}, never n1-standard-1: one vCPU starves the GPU.
gcloud container node-pools create eops-baseline \\
  --project "$PROJECT" --cluster "$CLUSTER" --region "$REGION" \\
  --node-locations "$ZONES" \\
  --machine-type {_q(inputs.machine)} \\
  --accelerator type={inputs.gpu_type},count=1,gpu-driver-version=latest \\
  --num-nodes {sizing.baseline_per_zone} \\
  --max-pods-per-node {MAX_PODS_PER_NODE} \\
{secondary}  --node-labels elasticityops.io/pool=baseline
"""
    preload_note = ""
    if inputs.preload_disk_image:
        preload_note = (
            f"#    Function images are preloaded from the disk image {inputs.preload_disk_image} (built "
            "beforehand\n#    with gke-disk-image-builder) as a secondary boot disk: no pull at all on a "
            "new node.\n"
        )
    market = "spot -> on-demand" if inputs.spot else "on-demand"
    fallback_order = f"{shape.gpu_type} {market}" + (
        f", then {inputs.fallback_gpu_type}" if inputs.fallback_gpu_type else ""
    )
    return f"""#!/usr/bin/env bash
{comment_block(chr(10).join(header))}set -euo pipefail

PROJECT={_q(inputs.project)}
REGION={_q(inputs.region)}
ZONES={_q(zones_csv)}
CLUSTER={_q(inputs.cluster)}
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"

# 1. Quota first: NAP's limits are worthless above the project's regional quota, and a
#    4,000-node peak is far above any default. Quota is per project, region and GPU model
#    (spot uses the PREEMPTIBLE_ metric). Quota does not guarantee stock: zonal stockouts happen,
#    which is why the ComputeClass below falls back across zones, spot/on-demand and GPU models.
#    Check by hand:
#      gcloud compute regions describe "$REGION" --project "$PROJECT" --flatten=quotas \\
#        --filter="quotas.metric~GPUS|^CPUS$" --format="table(quotas.metric,quotas.limit,quotas.usage)"
#    Request increases: https://console.cloud.google.com/iam-admin/quotas (filter by metric and region).
need_quota() {{
  local metric="$1" wanted="$2" have
  have="$(gcloud compute regions describe "$REGION" --project "$PROJECT" --flatten=quotas \\
    --filter="quotas.metric=$metric" --format="value(quotas.limit)")"
  have="${{have%.*}}"
  if (( ${{have:-0}} < wanted )); then
    echo "quota $metric in $REGION is ${{have:-0}}, need $wanted: request an increase first" >&2
    return 1
  fi
}}
if [[ "${{EOPS_SKIP_QUOTA_CHECK:-0}}" != 1 ]]; then
{quota_lines}
fi

# 2. The APIs the cluster needs (idempotent).
gcloud services enable container.googleapis.com artifactregistry.googleapis.com --project "$PROJECT"

# 3. The cluster. A regional control plane (GKE supports autoscaling to 5,000 nodes only there).
#    - a small system pool ({SYSTEM_NODES_PER_ZONE} x {SYSTEM_MACHINE_TYPE} per zone) keeps kube-system
#      off GPU nodes;
#    - node auto-provisioning with the limits in nap-config.yaml ({sizing.gpu_limit} {inputs.gpu_type});
#    - autoscaling profile optimize-utilization: GKE does not expose scale-down-unneeded-time; this
#      profile removes idle nodes sooner than the balanced default (upstream default: 10 min),
#      which suits nodes that each ran one request;
#    - image streaming: containers start before the whole image is pulled (images must live in
#      Artifact Registry);
#    - pod range /{sizing.pod_range_prefix} and node subnet /{sizing.node_subnet_prefix}: the defaults
#      (/14 at 110 pods per node) stop at 1,024 nodes;
#    - consider --enable-private-nodes: {sizing.max_nodes} nodes with public IPs also need that many
#      IN_USE_ADDRESSES quota.
gcloud container clusters create "$CLUSTER" \\
  --project "$PROJECT" --region "$REGION" --node-locations "$ZONES" \\
  --release-channel {inputs.release_channel} \\
  --machine-type {SYSTEM_MACHINE_TYPE} --num-nodes {SYSTEM_NODES_PER_ZONE} \\
  --enable-ip-alias --create-subnetwork name="$CLUSTER-nodes",range=/{sizing.node_subnet_prefix} \\
  --cluster-ipv4-cidr=/{sizing.pod_range_prefix} --default-max-pods-per-node {MAX_PODS_PER_NODE} \\
  --enable-autoprovisioning --autoprovisioning-config-file "$HERE/nap-config.yaml" \\
  --autoscaling-profile optimize-utilization \\
  --enable-image-streaming
{baseline_section}
# 5. Credentials for kubectl, then the cluster-side objects.
gcloud container clusters get-credentials "$CLUSTER" --project "$PROJECT" --region "$REGION"

# 6. PriorityClasses: eops-high/normal/low for invocations, eops-placeholder (-10, never preempts)
#    for warm capacity that every real pod preempts.
kubectl apply -f "$HERE/priorityclasses.yaml"

# 7. The ComputeClass {COMPUTE_CLASS_NAME}: ordered fallbacks ({fallback_order}).
#    It also pins the machine type: without it NAP picks the smallest machine that fits the pod's
#    requests, which for a small request is an n1-standard-1 that starves the GPU.
{preload_note}#    Pods opt in with nodeSelector cloud.google.com/compute-class: {COMPUTE_CLASS_NAME}.
#    Older GKE versions lack the CRD: then skip it and keep the pods' nodeSelector on the
#    accelerator label, plus cloud.google.com/gke-gpu-driver-version: latest (eops render deploy
#    --kube-gpu-driver-version latest), or auto-provisioned GPU nodes get no driver and no GPU.
if kubectl api-resources --api-group=cloud.google.com -o name | grep -q '^computeclasses\\.'; then
  kubectl apply -f "$HERE/computeclass.yaml"
else
  echo "no ComputeClass CRD here: skipped computeclass.yaml (NAP still works from pod requests)" >&2
fi

echo "done: run 'eops doctor --peak {inputs.peak}' to check the cluster"
"""


def render_gke(inputs: GkeInputs) -> GkeRender:
    validate(inputs)
    sizing = size(inputs)
    warnings = warnings_for(inputs, sizing)
    priority_classes = priority_class_manifests()
    klass = compute_class(inputs)
    nap = nap_config(inputs, sizing)
    files = {
        "create-cluster.sh": _script(inputs, sizing, warnings),
        "nap-config.yaml": dump_documents(
            [Document(nap)],
            header=(
                "Node auto-provisioning limits, read by gcloud --autoprovisioning-config-file.\n"
                + "\n".join(sizing.rules[:2])
            ),
        ),
        "priorityclasses.yaml": dump_documents(
            [Document(m) for m in priority_classes],
            header=(
                "ElasticityOps PriorityClasses (kubectl apply -f). The placeholder at -10 is "
                "the\nautoscaler's expendable cutoff."
            ),
        ),
        "computeclass.yaml": dump_documents(
            [Document(klass)],
            header=(
                "GKE custom ComputeClass: rules are tried in order when the first has no "
                "capacity\n(stockout, quota). Needs a GKE version with ComputeClass support and NAP "
                "enabled."
            ),
        ),
    }
    return GkeRender(
        script=files["create-cluster.sh"],
        files=files,
        manifests=[*priority_classes, klass],
        nap_config=nap,
        sizing=sizing,
        warnings=warnings,
    )


def expand_zones(region: str, zones: list[str]) -> tuple[str, ...]:
    """Accept `a,b,c` as well as full zone names."""
    return tuple(z if "-" in z else f"{region}-{z}" for z in (z.strip() for z in zones) if z)
