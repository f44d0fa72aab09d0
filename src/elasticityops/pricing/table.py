"""The machine price table, read once from machine_prices.json in this package.

One owner of every price: the planner's default node prices and the gateway's cost of each
invocation both come from here, so a re-priced row changes both."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources


class Capacity(StrEnum):
    on_demand = "on-demand"
    spot = "spot"
    local = "local"  # a slot of the local backend: priced as the on-demand node of its GPU type


@dataclass(frozen=True)
class MachinePrice:
    gpu_type: str
    machine_type: str
    capacity: Capacity
    usd_per_hour: float | None  # None: no sourced figure; its node-seconds have no known cost
    source: str
    retrieved: str


@dataclass(frozen=True)
class PriceTable:
    rows: tuple[MachinePrice, ...]

    def row(self, gpu_type: str, capacity: Capacity) -> MachinePrice | None:
        # A local slot stands for the node of its GPU type; what it would cost there is the
        # figure that lets local runs and cluster runs be compared.
        wanted = Capacity.on_demand if capacity is Capacity.local else capacity
        for price in self.rows:
            if price.gpu_type == gpu_type and price.capacity is wanted:
                return price
        return None

    def per_hour(self, gpu_type: str | None, capacity: Capacity) -> float | None:
        """USD per node-hour; None when the GPU type is unknown or its figure was not sourced."""
        if gpu_type is None:
            return None
        price = self.row(gpu_type, capacity)
        return None if price is None else price.usd_per_hour


def capacity_of_backend(backend: str) -> Capacity:
    """What a backend's node-seconds are priced as when their node does not say: local slots
    as the on-demand node of their GPU type; a cluster node the GPU node watch never saw (or
    with the watch off) on demand. A node the watch saw names its own (spot or on demand)."""
    return Capacity.local if backend == "local" else Capacity.on_demand


def parse(document: dict[str, object]) -> PriceTable:
    raw_rows = document["rows"]
    assert isinstance(raw_rows, list)
    return PriceTable(
        tuple(
            MachinePrice(
                gpu_type=str(r["gpu_type"]),
                machine_type=str(r["machine_type"]),
                capacity=Capacity(r["capacity"]),
                usd_per_hour=None if r["usd_per_hour"] is None else float(r["usd_per_hour"]),
                source=str(r["source"]),
                retrieved=str(r["retrieved"]),
            )
            for r in raw_rows
        )
    )


@functools.cache
def prices() -> PriceTable:
    text = resources.files(__package__).joinpath("machine_prices.json").read_text(encoding="utf-8")
    return parse(json.loads(text))


def required(gpu_type: str, capacity: Capacity) -> float:
    """A price that must be in the table (the planner's defaults): a missing one is a bug."""
    value = prices().per_hour(gpu_type, capacity)
    if value is None:
        raise LookupError(f"machine_prices.json has no price for {gpu_type} {capacity}")
    return value
