"""The cluster the planner assumes unless told otherwise, and the headroom controller sizes for
until its own cluster has provisioned a node: GKE's GPU node pools under upstream's autoscaler.
One owner for both, so `eops plan` and `eops serve --headroom predictive` start from the same
lead time."""

SCAN_INTERVAL_S = 10.0
"""The autoscaler's loop period (cluster-autoscaler --scan-interval)."""
GPU_SCALE_UP_DELAY_S = 30.0
"""Upstream ignores unschedulable pods until the oldest is this old when any asks for a GPU."""
PROVISION_MEDIAN_S = 240.0
PROVISION_P95_S = 420.0
"""Seconds from a scale-up decision to a schedulable GPU node, median and p95 (the CA FAQ's
3-4 minutes on GCE; GKE cold starts 4-6 minutes P50-P99)."""
DEFAULT_PROVISION_DELAY = f"lognormal:median={PROVISION_MEDIAN_S:g},p95={PROVISION_P95_S:g}"
DEFAULT_LEAD_TIME_S = GPU_SCALE_UP_DELAY_S + SCAN_INTERVAL_S + PROVISION_P95_S
"""From a warm unit being taken to its replacement being ready, at p95: 460 s."""
DEFAULT_MAX_NODES = 5000
"""The most autoscaled nodes a predictive rule asks for: the largest GKE cluster's quota."""
