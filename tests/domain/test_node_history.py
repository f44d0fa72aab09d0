"""A GPU node's record (domain/node_history.py): what it still owes when its node is gone, and
the records it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.node_history import WARM_SOURCE, LastJob, NodeHistory, closing_charges
from elasticityops.domain.node_seconds import Phase
from elasticityops.pricing.table import Capacity

T0 = datetime(2026, 12, 2, 9, tzinfo=UTC)
T4 = "nvidia-tesla-t4"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_gone_node_owes_the_idle_time_after_its_last_job_and_its_unused_life() -> None:
    last = LastJob("inv-1", 2, "fn", T4, at(100))
    owed = closing_charges(NodeHistory("n1", T4, Capacity.spot, at(0), unused=False, last=last), at(400))
    assert [
        (c.source, c.attempt, c.function, c.spans[0].phase, c.spans[0].seconds, c.capacity) for c in owed
    ] == [("inv-1", 2, "fn", Phase.idle_after, 300, Capacity.spot)]
    never = closing_charges(NodeHistory("n2", T4, Capacity.on_demand, at(0), unused=True), at(400))
    assert [(c.source, c.function, c.spans[0].phase, c.spans[0].seconds) for c in never] == [
        (WARM_SOURCE + "n2", "", Phase.warm_unused, 400)
    ]


def test_a_node_gone_no_later_than_its_facts_owes_nothing() -> None:
    last = LastJob("inv-1", 0, "fn", T4, at(100))
    assert closing_charges(NodeHistory("n1", T4, Capacity.spot, at(0), unused=True, last=last), at(0)) == []
    assert closing_charges(NodeHistory("n1", T4, Capacity.spot, at(0), unused=False), at(900)) == []


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"name": ""}, "needs the node's name"),
        ({"created_at": datetime(2026, 12, 2, 9)}, "created_at must be an aware time"),
        (
            {"last": LastJob("inv-1", 0, "fn", T4, datetime(2026, 12, 2, 9))},
            "its last job's end must be an aware time",
        ),
    ],
    ids=["no-name", "naive-creation", "naive-end"],
)
def test_a_record_with_bad_facts_is_refused(fields: dict[str, object], problem: str) -> None:
    given: dict[str, object] = {
        "name": "n1",
        "gpu_type": T4,
        "capacity": Capacity.spot,
        "created_at": T0,
        "unused": False,
        **fields,
    }
    with pytest.raises(ValueError, match=problem):
        NodeHistory(**given)  # type: ignore[arg-type]
