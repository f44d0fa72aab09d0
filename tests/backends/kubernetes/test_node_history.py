"""The GPU node watch's records across a restart (gpu_nodes.py with domain/node_history.py):
what one watch writes as the facts change, and what a watch restarted from those records
charges: a node's idle time after a job that ended before the restart, the warm time of a node
no job used before it, a node gone while no gateway watched; and no record written for a
node's status."""

from __future__ import annotations

from datetime import UTC, datetime

from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, Occupant
from elasticityops.domain.node_history import WARM_SOURCE, LastJob, NodeHistory, NodeHistoryWrite
from elasticityops.domain.node_seconds import Charge, Phase
from elasticityops.pricing.table import Capacity

from .builders import gpu_node

T4 = "nvidia-tesla-t4"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class Records:
    """The store's table as the writes leave it."""

    def __init__(self) -> None:
        self.rows: dict[str, NodeHistory] = {}
        self.writes: list[NodeHistoryWrite] = []

    def apply(self, writes: list[NodeHistoryWrite]) -> None:
        self.writes.extend(writes)
        for change in writes:
            if change.history is None:
                self.rows.pop(change.name, None)
            else:
                self.rows[change.name] = change.history


def keeping(records: Records) -> GpuNodes:
    """A watch started from `records` whose first list is empty so far (call `listed` after it)."""
    nodes = GpuNodes()
    nodes.restore(list(records.rows.values()))
    return nodes


def seconds(charges: list[Charge]) -> list[tuple[str, str, Phase, float]]:
    return [(c.source, c.function, s.phase, s.seconds) for c in charges for s in c.spans]


def test_a_node_whose_last_job_ended_before_the_restart_is_charged_its_idle_after_at_removal() -> None:
    store = Records()
    before = keeping(store)
    before.listed(now=0)
    before.on_node("ADDED", gpu_node("n1", created=10, spot=True), now=11)
    before.occupied("n1", "inv-1", now=20, unused_until=None)
    before.vacated("n1", "inv-1", now=100, occupant=Occupant("inv-1", 2, "fn", T4))
    store.apply(before.history_writes())
    assert store.rows["n1"] == NodeHistory(
        "n1", T4, Capacity.spot, at(10), unused=False, last=LastJob("inv-1", 2, "fn", T4, at(100))
    )

    after = keeping(store)  # the gateway restarted (or another replica leads now)
    assert after.on_node("ADDED", gpu_node("n1", created=10, spot=True), now=500) == []  # the first list
    assert after.listed(now=500) == []
    assert after.history_writes() == [], "the record is as it was"
    removed = after.on_node("DELETED", gpu_node("n1", created=10, spot=True), now=700)
    assert seconds(removed) == [("inv-1", "fn", Phase.idle_after, 600)]
    assert (removed[0].attempt, removed[0].capacity) == (2, Capacity.spot)
    store.apply(after.history_writes())
    assert store.rows == {}, "forgotten once its last charges are out"


def test_a_node_no_job_used_before_the_restart_is_warm_unused_from_its_creation() -> None:
    store = Records()
    before = keeping(store)
    before.listed(now=0)
    before.on_node("ADDED", gpu_node("spare", created=100), now=101)
    before.on_node("ADDED", gpu_node("picked", created=100), now=101)
    store.apply(before.history_writes())
    assert {r.name: r.unused for r in store.rows.values()} == {"spare": True, "picked": True}

    after = keeping(store)
    after.on_node("ADDED", gpu_node("spare", created=100), now=900)
    after.on_node("ADDED", gpu_node("picked", created=100), now=900)
    after.listed(now=900)
    where = after.placement("picked", pod_created=at(1000), placed=at(1001))
    assert where is not None
    assert where.warm, "up and empty before the pod: the record's last end, or its creation"
    picked = after.occupied("picked", "inv-1", now=1001, unused_until=1001)
    assert seconds(picked) == [(WARM_SOURCE + "picked", "", Phase.warm_unused, 901)]
    removed = after.on_node("DELETED", gpu_node("spare", created=100), now=1200)
    assert seconds(removed) == [(WARM_SOURCE + "spare", "", Phase.warm_unused, 1100)]
    store.apply(after.history_writes())
    assert set(store.rows) == {"picked"}
    assert not store.rows["picked"].unused, "its first job came: nothing more is warm unused"


def test_a_node_gone_while_no_gateway_watched_is_charged_up_to_the_first_list_and_forgotten() -> None:
    store = Records()
    store.apply(
        [
            NodeHistoryWrite("idle", NodeHistory("idle", T4, Capacity.on_demand, at(0), False, None)),
            NodeHistoryWrite(
                "gone",
                NodeHistory("gone", T4, Capacity.spot, at(0), False, LastJob("inv-9", 0, "fn", T4, at(50))),
            ),
            NodeHistoryWrite("never", NodeHistory("never", T4, Capacity.on_demand, at(20), True, None)),
        ]
    )
    after = keeping(store)
    after.on_node("ADDED", gpu_node("idle", created=0), now=300)
    charges = after.listed(now=300)
    assert sorted(seconds(charges)) == [
        ("inv-9", "fn", Phase.idle_after, 250),
        (WARM_SOURCE + "never", "", Phase.warm_unused, 280),
    ]
    assert {c.source: c.capacity for c in charges} == {
        "inv-9": Capacity.spot,
        WARM_SOURCE + "never": Capacity.on_demand,
    }
    store.apply(after.history_writes())
    assert set(store.rows) == {"idle"}


def test_a_record_of_an_earlier_node_of_the_same_name_is_closed_at_the_new_ones_creation() -> None:
    store = Records()
    store.apply([NodeHistoryWrite("n1", NodeHistory("n1", T4, Capacity.on_demand, at(0), True, None))])
    after = keeping(store)
    charges = after.on_node("ADDED", gpu_node("n1", created=400), now=1000)
    assert seconds(charges) == [(WARM_SOURCE + "n1", "", Phase.warm_unused, 400)]
    after.listed(now=1000)
    store.apply(after.history_writes())
    assert store.rows["n1"].created_at == at(400)
    assert not store.rows["n1"].unused, "the new one came up while no one watched: its past is not known"


def test_records_are_written_when_the_facts_change_not_with_the_nodes_status() -> None:
    store = Records()
    nodes = keeping(store)
    nodes.listed(now=0)
    nodes.on_node("ADDED", gpu_node("n1", created=10, ready=False), now=11)
    store.apply(nodes.history_writes())
    assert len(store.writes) == 1, "first seen"
    for now in (20, 30, 40):
        nodes.on_node("MODIFIED", gpu_node("n1", created=10, ready=now >= 30), now=now)
        assert nodes.history_writes() == [], "a status update is no fact of the attribution"
    nodes.occupied("n1", "inv-1", now=50)
    nodes.occupied("n1", "inv-1", now=55)
    store.apply(nodes.history_writes())
    nodes.vacated("n1", "inv-1", now=90, occupant=Occupant("inv-1", 0, "fn", T4))
    store.apply(nodes.history_writes())
    assert [w.history.last if w.history else "forgotten" for w in store.writes] == [
        None,
        None,
        LastJob("inv-1", 0, "fn", T4, at(90)),
    ]
    assert [w.history.unused if w.history else None for w in store.writes] == [True, False, False]


def test_a_watch_without_a_store_writes_no_records_and_knows_no_past() -> None:
    nodes = GpuNodes()
    nodes.on_node("ADDED", gpu_node("old", created=0), now=5000)
    assert nodes.listed(now=5000) == []
    nodes.on_node("ADDED", gpu_node("new", created=5001), now=5002)
    assert nodes.history_writes() == []
    assert seconds(nodes.on_node("DELETED", gpu_node("old", created=0), now=6000)) == []
    assert seconds(nodes.on_node("DELETED", gpu_node("new", created=5001), now=6001)) == [
        (WARM_SOURCE + "new", "", Phase.warm_unused, 1000)
    ]
