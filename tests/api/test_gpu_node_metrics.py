"""`eops_gpu_nodes{state,cluster}` on /metrics: the GPU nodes by state, the gateway's own cluster
as "" and each MultiKueue worker by name; each scrape shows the clusters as they are then."""

from __future__ import annotations

from elasticityops.api.metrics import Metrics


def _lines(body: bytes) -> set[str]:
    return {line for line in body.decode().splitlines() if line.startswith("eops_gpu_nodes{")}


def test_gpu_nodes_render_by_state_and_cluster() -> None:
    metrics = Metrics()
    nodes = {
        "": {"ready": 0, "idle": 0},
        "worker-1": {"ready": 3, "idle": 1},
    }
    assert _lines(metrics.render({}, {}, None, nodes=nodes)) == {
        'eops_gpu_nodes{cluster="",state="ready"} 0.0',
        'eops_gpu_nodes{cluster="",state="idle"} 0.0',
        'eops_gpu_nodes{cluster="worker-1",state="ready"} 3.0',
        'eops_gpu_nodes{cluster="worker-1",state="idle"} 1.0',
    }
    # A worker no longer configured drops out at the next scrape instead of keeping its count.
    assert _lines(metrics.render({}, {}, None, nodes={"": {"ready": 2}})) == {
        'eops_gpu_nodes{cluster="",state="ready"} 2.0'
    }
    assert _lines(metrics.render({}, {}, None)) == set(), "no node watch: no series"
