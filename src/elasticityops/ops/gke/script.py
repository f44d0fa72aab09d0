"""`create-cluster.sh`: the gcloud and kubectl steps in order, each under a comment saying why.

One function per step; `cluster_script` joins them. Where a step needs a number, the number comes
from the sizing, never from here."""

from __future__ import annotations

import shlex

from elasticityops.ops.gke.inputs import GPU_SHAPES, GkeInputs
from elasticityops.ops.gke.objects import COMPUTE_CLASS_NAME
from elasticityops.ops.gke.sizing import (
    MAX_PODS_PER_NODE,
    SYSTEM_MACHINE_TYPE,
    SYSTEM_NODES_PER_ZONE,
    GkeSizing,
)
from elasticityops.ops.yaml_docs import comment_block


def _q(value: str) -> str:
    return shlex.quote(value)


def cluster_script(inputs: GkeInputs, sizing: GkeSizing, warnings: tuple[str, ...]) -> str:
    return "".join(
        (
            _preamble(inputs, sizing, warnings),
            _quota_step(sizing),
            _cluster_step(inputs, sizing),
            _baseline_step(inputs, sizing),
            _cluster_objects_steps(inputs),
        )
    )


def _header(inputs: GkeInputs, sizing: GkeSizing, warnings: tuple[str, ...]) -> str:
    """What the script was rendered from and why it looks as it does."""
    header = [
        "Rendered by `eops render gke`: review it, then run it once per cluster.",
        f"Inputs: project={inputs.project} region={inputs.region} zones={','.join(inputs.zones)} "
        f"peak={inputs.peak} baseline={inputs.baseline} spot={inputs.spot} gpu={inputs.gpu_type} "
        f"machine={inputs.machine} fallback={inputs.fallback_gpu_type or 'none'}",
        "",
        "Sizing rules:",
        *[f"  - {rule}" for rule in sizing.rules],
        "",
        "No per-request node pools, ever: node auto-provisioning creates and deletes GPU pools itself;",
        "a pool per request hits the node-pool limit and costs minutes per request.",
    ]
    if warnings:
        header += ["", "WARNINGS:", *[f"  ! {w}" for w in warnings]]
    return "\n".join(header)


def _preamble(inputs: GkeInputs, sizing: GkeSizing, warnings: tuple[str, ...]) -> str:
    zones_csv = ",".join(inputs.zones)
    return f"""#!/usr/bin/env bash
{comment_block(_header(inputs, sizing, warnings))}set -euo pipefail

PROJECT={_q(inputs.project)}
REGION={_q(inputs.region)}
ZONES={_q(zones_csv)}
CLUSTER={_q(inputs.cluster)}
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"

"""


def _quota_step(sizing: GkeSizing) -> str:
    quota_lines = "\n".join(f"need_quota {metric} {amount}" for metric, amount in sizing.quota.items())
    return f"""# 1. Quota first: NAP's limits are worthless above the project's regional quota, and a
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

"""


def _cluster_step(inputs: GkeInputs, sizing: GkeSizing) -> str:
    return f"""# 2. The APIs the cluster needs (idempotent).
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
"""


def _baseline_step(inputs: GkeInputs, sizing: GkeSizing) -> str:
    """The one node pool made by hand; nothing without a baseline."""
    if not inputs.baseline:
        return ""
    secondary = ""
    if inputs.preload_disk_image:
        image = f"projects/{inputs.project}/global/images/{inputs.preload_disk_image}"
        secondary = f"  --secondary-boot-disk=disk-image={image},mode=CONTAINER_IMAGE_CACHE \\\n"
    return f"""
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


def _cluster_objects_steps(inputs: GkeInputs) -> str:
    """Credentials, then the PriorityClasses and the ComputeClass the render wrote beside it."""
    preload_note = ""
    if inputs.preload_disk_image:
        preload_note = (
            f"#    Function images are preloaded from the disk image {inputs.preload_disk_image} (built "
            "beforehand\n#    with gke-disk-image-builder) as a secondary boot disk: no pull at all on a "
            "new node.\n"
        )
    market = "spot -> on-demand" if inputs.spot else "on-demand"
    fallback_order = f"{GPU_SHAPES[inputs.gpu_type].gpu_type} {market}" + (
        f", then {inputs.fallback_gpu_type}" if inputs.fallback_gpu_type else ""
    )
    return f"""
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
