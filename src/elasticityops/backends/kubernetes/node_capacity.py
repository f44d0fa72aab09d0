"""What a GKE node is priced as, read from its labels: a Spot VM or a preemptible VM (priced
as spot: the same pricing model) or, failing both, on demand.

GKE labels a Spot VM node `cloud.google.com/gke-spot: "true"` and `cloud.google.com/
gke-provisioning: spot`, a preemptible one `cloud.google.com/gke-preemptible: "true"` (and
`gke-provisioning: preemptible`); an on-demand node carries none of these (or
`gke-provisioning: standard`). Any one of them that says spot is enough: node pools made by hand
or by older GKE versions do not all carry every label."""

from __future__ import annotations

from collections.abc import Mapping

from elasticityops.pricing.table import Capacity

SPOT_LABEL = "cloud.google.com/gke-spot"
PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"
PROVISIONING_LABEL = "cloud.google.com/gke-provisioning"
_SPOT_PROVISIONING = frozenset({"spot", "preemptible"})


def capacity_of_labels(labels: Mapping[str, object]) -> Capacity:
    """Spot if any of GKE's labels says so; on demand otherwise. Label values are compared as
    Kubernetes writes them (lower case), with no other spelling taken for a yes."""
    if labels.get(SPOT_LABEL) == "true" or labels.get(PREEMPTIBLE_LABEL) == "true":
        return Capacity.spot
    if labels.get(PROVISIONING_LABEL) in _SPOT_PROVISIONING:
        return Capacity.spot
    return Capacity.on_demand
