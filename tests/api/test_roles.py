"""A single gateway (no --leader-elect) is the leader: /readyz and /metrics say so. Replicas
with leader election: tests/backends/kubernetes/test_replicas_cluster.py."""

from __future__ import annotations

import httpx

from helpers.server import RunningServer


def test_a_single_gateway_says_it_leads(gateway: RunningServer) -> None:
    ready = httpx.get(f"{gateway.url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "role": "leader"}
    with gateway.client() as client:
        metrics = client.get("/metrics").text
    assert "\neops_leader 1.0\n" in metrics
