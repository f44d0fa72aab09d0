"""The Kubernetes edge of node-seconds (gpu_nodes.py): where a pod's node time starts (a new
node from its creation, a warm one from the pick), and the node time the pod watch and node
watch close: idle after a job until the node's reuse or removal, warm capacity no one used."""

from __future__ import annotations

from datetime import UTC, datetime

from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, Occupant
from elasticityops.domain.node_history import WARM_SOURCE
from elasticityops.domain.node_seconds import Charge, Phase
from elasticityops.pricing.table import Capacity

from .builders import gpu_node

T4 = "nvidia-tesla-t4"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def watched() -> GpuNodes:
    nodes = GpuNodes()
    nodes.synced = True  # every node below is seen from its start
    return nodes


def occupant(inv: str, function: str = "fn") -> Occupant:
    return Occupant(inv, attempt=0, function=function, gpu_type=T4)


def seconds(charges: list[Charge]) -> list[tuple[str, str, Phase, float]]:
    return [(c.source, c.function, s.phase, s.seconds) for c in charges for s in c.spans]


def test_a_new_node_is_its_pods_from_its_creation_and_idle_after_goes_to_it_at_removal() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("n1", created=100, gpus=0), now=101)  # made for the pod of t=90
    nodes.on_node("MODIFIED", gpu_node("n1", created=100), now=300)
    where = nodes.placement("n1", pod_created=at(90), placed=at(310))
    assert where is not None
    assert (where.node_since, where.warm, where.unused_until) == (at(100), False, None)
    assert nodes.occupied("n1", "inv-1", now=310, unused_until=None) == [], "its provisioning, not unused"
    nodes.vacated("n1", "inv-1", now=400, occupant=occupant("inv-1"))
    removed = nodes.on_node("DELETED", gpu_node("n1", created=100), now=1000)
    assert seconds(removed) == [("inv-1", "fn", Phase.idle_after, 600)]


def test_a_reused_node_charges_the_idle_time_to_the_job_before() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("n1", created=0), now=1)
    nodes.occupied("n1", "inv-1", now=10)
    nodes.vacated("n1", "inv-1", now=100, occupant=occupant("inv-1", "alpha"))
    where = nodes.placement("n1", pod_created=at(130), placed=at(131))
    assert where is not None
    assert (where.node_since, where.warm) == (at(131), True), "a warm pick: no provisioning"
    reused = nodes.occupied("n1", "inv-2", now=131, unused_until=None)
    assert seconds(reused) == [("inv-1", "alpha", Phase.idle_after, 31)]
    assert nodes.occupied("n1", "inv-2", now=140) == [], "seen again: nothing more"
    nodes.vacated("n1", "inv-2", now=200, occupant=occupant("inv-2", "beta"))
    assert seconds(nodes.on_node("DELETED", gpu_node("n1", created=0), now=260)) == [
        ("inv-2", "beta", Phase.idle_after, 60)
    ]


def test_warm_capacity_picked_first_time_is_unused_until_the_pick() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("warm", created=0), now=1)  # held warm by a placeholder
    where = nodes.placement("warm", pod_created=at(500), placed=at(501))
    assert where is not None
    assert where.warm
    assert where.unused_until == at(501)
    charged = nodes.occupied("warm", "inv-1", now=501, unused_until=501)
    assert seconds(charged) == [(WARM_SOURCE + "warm", "", Phase.warm_unused, 501)]
    assert charged[0].gpu_type == T4


def test_a_node_no_job_used_is_warm_unused_for_its_whole_life() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("spare", created=0), now=1)
    assert seconds(nodes.on_node("DELETED", gpu_node("spare", created=0), now=900)) == [
        (WARM_SOURCE + "spare", "", Phase.warm_unused, 900)
    ]


def test_a_node_there_before_the_gateway_looked_has_no_past_charged() -> None:
    nodes = GpuNodes()
    nodes.on_node("ADDED", gpu_node("old", created=0), now=5000)  # the first list
    nodes.synced = True
    assert nodes.occupied("old", "inv-1", now=5010, unused_until=5010) == []
    nodes.vacated("old", "inv-1", now=5100, occupant=occupant("inv-1"))
    assert seconds(nodes.on_node("DELETED", gpu_node("old", created=0), now=5200)) == [
        ("inv-1", "fn", Phase.idle_after, 100)
    ], "what follows is charged"


def test_a_spot_nodes_placement_and_charges_carry_spot() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("s1", created=0, spot=True), now=1)
    nodes.on_node("ADDED", gpu_node("s2", created=0, spot=True), now=1)
    where = nodes.placement("s1", pod_created=at(100), placed=at(101))
    assert where is not None
    assert where.capacity is Capacity.spot, "the attempt's spans are priced spot when it ends"
    unused = nodes.occupied("s1", "inv-1", now=101, unused_until=101)
    nodes.vacated("s1", "inv-1", now=200, occupant=occupant("inv-1"))
    idle = nodes.on_node("DELETED", gpu_node("s1", created=0, spot=True), now=260)
    never_used = nodes.on_node("DELETED", gpu_node("s2", created=0, spot=True), now=300)
    charged = [*unused, *idle, *never_used]
    assert [(c.source, c.spans[0].phase, c.capacity) for c in charged] == [
        (WARM_SOURCE + "s1", Phase.warm_unused, Capacity.spot),
        ("inv-1", Phase.idle_after, Capacity.spot),
        (WARM_SOURCE + "s2", Phase.warm_unused, Capacity.spot),
    ]


def test_an_on_demand_nodes_charges_say_on_demand() -> None:
    nodes = watched()
    nodes.on_node("ADDED", gpu_node("n1", created=0), now=1)
    where = nodes.placement("n1", pod_created=at(100), placed=at(101))
    assert where is not None
    assert where.capacity is Capacity.on_demand
    nodes.occupied("n1", "inv-1", now=101, unused_until=101)
    nodes.vacated("n1", "inv-1", now=200, occupant=occupant("inv-1"))
    [idle] = nodes.on_node("DELETED", gpu_node("n1", created=0), now=260)
    assert idle.capacity is Capacity.on_demand
