"""What a GKE node is priced as, from its labels (node_capacity.py): Spot VMs and preemptible
VMs as spot, everything else on demand."""

from __future__ import annotations

import pytest

from elasticityops.backends.kubernetes.gpu_nodes import node_state
from elasticityops.backends.kubernetes.node_capacity import capacity_of_labels
from elasticityops.pricing.table import Capacity

ACCELERATOR = {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}


@pytest.mark.parametrize(
    ("labels", "capacity"),
    [
        ({"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-provisioning": "spot"}, Capacity.spot),
        ({"cloud.google.com/gke-spot": "true"}, Capacity.spot),
        ({"cloud.google.com/gke-provisioning": "spot"}, Capacity.spot),
        ({"cloud.google.com/gke-preemptible": "true"}, Capacity.spot),
        ({"cloud.google.com/gke-provisioning": "preemptible"}, Capacity.spot),
        ({}, Capacity.on_demand),
        ({"cloud.google.com/gke-provisioning": "standard"}, Capacity.on_demand),
        ({"cloud.google.com/gke-spot": "false"}, Capacity.on_demand),
        ({"cloud.google.com/gke-spot": "True"}, Capacity.on_demand),
        ({"cloud.google.com/gke-preemptible": ""}, Capacity.on_demand),
    ],
    ids=[
        "spot-both-labels",
        "spot-label",
        "spot-provisioning",
        "preemptible-label",
        "preemptible-provisioning",
        "no-labels",
        "standard-provisioning",
        "spot-false",
        "not-kubernetes-spelling",
        "preemptible-empty",
    ],
)
def test_capacity_of_labels(labels: dict[str, str], capacity: Capacity) -> None:
    assert capacity_of_labels(labels) is capacity


def test_a_watched_node_carries_its_capacity() -> None:
    spot = {"metadata": {"name": "s", "labels": {**ACCELERATOR, "cloud.google.com/gke-spot": "true"}}}
    plain = {"metadata": {"name": "p", "labels": ACCELERATOR}}
    seen_spot, seen_plain = node_state(spot, now=0), node_state(plain, now=0)
    assert seen_spot is not None
    assert seen_plain is not None
    assert (seen_spot.capacity, seen_plain.capacity) == (Capacity.spot, Capacity.on_demand)
