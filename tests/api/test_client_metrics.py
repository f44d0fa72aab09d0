"""The backend client's fault counters on /metrics: rendered as Prometheus counters from what the
client counted, absent for a backend that keeps none (the local one)."""

from __future__ import annotations

from elasticityops.api.metrics import Metrics
from elasticityops.domain.ports import ClientCounters


def _lines(body: bytes) -> set[str]:
    return {line for line in body.decode().splitlines() if line.startswith("eops_kube_")}


def test_client_counters_render_as_counters() -> None:
    metrics = Metrics()
    counters = ClientCounters({"429": 31, "504": 2, "connection": 1}, 34, {"ended": 5, "expired": 2}, 3)
    lines = _lines(metrics.render({}, {}, None, client=counters))
    assert lines == {
        'eops_kube_api_errors_total{code="429"} 31.0',
        'eops_kube_api_errors_total{code="504"} 2.0',
        'eops_kube_api_errors_total{code="connection"} 1.0',
        "eops_kube_api_retries_total 34.0",
        'eops_kube_watch_restarts_total{reason="ended"} 5.0',
        'eops_kube_watch_restarts_total{reason="expired"} 2.0',
        "eops_kube_api_credential_refreshes_total 3.0",
    }
    # The next scrape shows the client's counts as they are then, not added to the last ones.
    later = ClientCounters({"429": 40}, 40, {"ended": 6, "expired": 2})
    assert 'eops_kube_api_errors_total{code="429"} 40.0' in _lines(metrics.render({}, {}, None, client=later))


def test_a_backend_without_counters_shows_none() -> None:
    assert _lines(Metrics().render({}, {}, None)) == set()
