"""The machine price table (pricing/machine_prices.json): every row sourced and dated, the
planner's node prices taken from it, a missing figure left unknown rather than guessed."""

from __future__ import annotations

import re

import pytest

from elasticityops.planner.settings import ON_DEMAND_NODE_PRICE, SPOT_NODE_PRICE, ClusterSettings
from elasticityops.pricing.table import Capacity, capacity_of_backend, parse, prices


def test_every_row_names_its_source_and_date() -> None:
    table = prices()
    assert {(r.gpu_type, r.capacity) for r in table.rows} == {
        (gpu, capacity)
        for gpu in ("nvidia-tesla-t4", "nvidia-l4")
        for capacity in (Capacity.on_demand, Capacity.spot)
    }
    for row in table.rows:
        assert row.source.strip(), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.retrieved), row


def test_the_planner_prices_its_t4_nodes_from_the_table() -> None:
    assert ON_DEMAND_NODE_PRICE == prices().per_hour("nvidia-tesla-t4", Capacity.on_demand) == 0.54
    assert SPOT_NODE_PRICE == prices().per_hour("nvidia-tesla-t4", Capacity.spot) == 0.24
    assert ClusterSettings(spot=True).node_price_per_hour == SPOT_NODE_PRICE
    assert ClusterSettings().node_price_per_hour == ON_DEMAND_NODE_PRICE


def test_a_local_slot_is_priced_as_the_on_demand_node_of_its_gpu_type() -> None:
    assert capacity_of_backend("local") is Capacity.local
    assert capacity_of_backend("kubernetes") is Capacity.on_demand
    assert prices().per_hour("nvidia-l4", Capacity.local) == prices().per_hour(
        "nvidia-l4", Capacity.on_demand
    )


@pytest.mark.parametrize("gpu_type", [None, "nvidia-h100-80gb"])
def test_an_unknown_gpu_type_has_no_price(gpu_type: str | None) -> None:
    assert prices().per_hour(gpu_type, Capacity.on_demand) is None


def test_an_unsourced_figure_stays_unknown() -> None:
    table = parse(
        {
            "rows": [
                {
                    "gpu_type": "nvidia-l4",
                    "machine_type": "g2-standard-8",
                    "capacity": "spot",
                    "usd_per_hour": None,
                    "source": "not found",
                    "retrieved": "2026-12-02",
                }
            ]
        }
    )
    assert table.per_hour("nvidia-l4", Capacity.spot) is None
