"""The simulated cloud under the dev cluster's autoscaler (pure: objects and settings in, patches out).

Upstream's cluster-autoscaler decides which node group grows and which node goes; its kwok
provider creates and deletes the Node objects. What a cloud does between (the VM boots, GKE's
driver installer runs, a zone has no capacity) is simulated here and played by kwok's node
stages (node_stages.py): each new autoscaled node is stamped once with the absolute times at
which it turns Ready and gets its GPU, sampled from the delay specs (the planner's language and
parser). A node in one of `stockout_zones` is an instance the cloud could not create: it is
annotated `eops.dev/stockout` (never booted), the autoscaler's kwok provider (patched at build
time, devcluster/patches/) reports it as an instance whose creation failed for lack of
resources, as GCE does, and upstream's own ScaleUpFailed, back-off, deletion of the failed
instance and move to another group follow. (Unpatched, a node that never turns Ready counts as
started, and upstream scales the same group again, never backing it off.) The static
pool (`baseline`) is kept here too: it belongs to no node group, so upstream never touches it.
The I/O loop is cloud_loop.py.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, HOSTNAME_LABEL, ZONE_LABEL
from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.node_stages import BOOT_AT, DRIVER_AT, STOCKOUT
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL, baseline_node_name
from elasticityops.planner.distributions import parse_distribution


def rfc3339(seconds: float) -> str:
    return (
        dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def is_new(node: dict[str, Any]) -> bool:
    """An autoscaled node the cloud has not acted on yet (neither stamped, failed nor going)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return (
        labels.get(ROLE_LABEL) == ROLE_AUTOSCALED
        and not meta.get("deletionTimestamp")
        and BOOT_AT not in annotations
        and STOCKOUT not in annotations
    )


def stockout_message(zone: str, gpu_type: str = "") -> str:
    what = f" for {gpu_type}" if gpu_type else ""
    return (
        f"simulated stockout: zone {zone} does not have enough resources available{what} "
        "(ZONE_RESOURCE_POOL_EXHAUSTED); the instance was not created"
    )


def stockout(node: dict[str, Any], settings: AutoscalerSettings) -> dict[str, Any] | None:
    """The patch that fails a new node whose zone (or zone and GPU type: `ZONE/TYPE`) has no
    capacity, or None."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    zone, kind = labels.get(ZONE_LABEL, ""), labels.get(ACCELERATOR_LABEL, "")
    if not is_new(node):
        return None
    if zone in settings.stockout_zones:
        return {"metadata": {"annotations": {STOCKOUT: stockout_message(zone)}}}
    if f"{zone}/{kind}" in settings.stockout_zones:
        return {"metadata": {"annotations": {STOCKOUT: stockout_message(zone, kind)}}}
    return None


def stamp(
    node: dict[str, Any], settings: AutoscalerSettings, rng: random.Random, now: float
) -> dict[str, Any] | None:
    """The metadata patch that starts a new autoscaled node's boot, or None (not ours, already
    stamped, going, or stocked out). Delays count from the node's creation, so a late stamp
    costs nothing.

    It also gives the node the `kubernetes.io/hostname` label a kubelet sets: the kwok provider
    copies its template unchanged, and a template cannot know the node's name."""
    if not is_new(node) or stockout(node, settings) is not None:
        return None
    meta = node["metadata"]
    labels = meta.get("labels") or {}
    patch: dict[str, Any] = {}
    name = str(meta.get("name", ""))
    if labels.get(HOSTNAME_LABEL) != name:
        patch["labels"] = {HOSTNAME_LABEL: name}
    created = epoch(meta.get("creationTimestamp")) or now
    boot = created + parse_distribution(settings.provision_delay).sample(rng)
    driver = boot + parse_distribution(settings.driver_delay).sample(rng)
    patch["annotations"] = {BOOT_AT: rfc3339(boot), DRIVER_AT: rfc3339(driver)}
    return {"metadata": patch}


def baseline_plan(existing: set[str], count: int) -> tuple[list[str], list[str]]:
    """(names to create, names to delete) so that exactly `count` static-pool nodes exist,
    named 0..count-1; the highest-numbered go first when the pool shrinks."""
    wanted = {baseline_node_name(i) for i in range(count)}
    create = sorted(wanted - existing)
    delete = sorted(existing - wanted, reverse=True)
    return create, delete
