"""What one simulation returns: per-request and per-node records plus counters. Plain data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SimTimeSeries:
    """The simulated cluster's load and node counts over time (not an invocation's `Timeline` of
    milestones, domain/invocations.py): samples taken at autoscaler loops every `timeline_step_s`
    (seconds from trace start).

    demand: requests running or waiting for a node. busy: nodes running a request.
    ready: schedulable nodes (baseline included). provisioning: nodes requested, not ready.
    headroom: placeholder pods asked for by the sizing function.
    """

    t_s: list[float]
    demand: list[int]
    busy: list[int]
    ready: list[int]
    provisioning: list[int]
    headroom: list[int]


@dataclass(frozen=True)
class SimResult:
    """Per request i (trace order): first start, final end, the node it finished on, restarts.
    Per node j: creation (scale-up decision, billing starts), ready time (inf if it never became
    ready) and deletion (inf if alive at the horizon). Nodes 0..baseline-1 are the fixed pool.
    """

    start_s: list[float]
    end_s: list[float]
    node: list[int]
    restarts: list[int]
    node_created_s: list[float]
    node_ready_s: list[float]
    node_deleted_s: list[float]
    baseline: int
    horizon_s: float
    busy_node_s: float
    peak_nodes: int
    quota_hits: int
    scale_up_failures: int
    provision_timeouts: int
    preemptions: int
    timeline: SimTimeSeries

    def billed_node_s(self, min_billed_s: float) -> float:
        """Node-seconds billed up to the horizon: per-second, at least `min_billed_s` per node."""
        total = 0.0
        horizon = self.horizon_s
        for created, deleted in zip(self.node_created_s, self.node_deleted_s, strict=True):
            life = min(deleted, horizon) - created
            if life > 0:
                total += life if life > min_billed_s else min_billed_s
        return total

    def provisioning_node_s(self) -> float:
        """Node-seconds billed while nodes were still booting (or never became ready)."""
        total = 0.0
        horizon = self.horizon_s
        for created, ready, deleted in zip(
            self.node_created_s, self.node_ready_s, self.node_deleted_s, strict=True
        ):
            total += max(0.0, min(ready, deleted, horizon) - created)
        return total
