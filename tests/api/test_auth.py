"""Bearer-token auth on /v1; probes and metrics are open."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from helpers.server import EOPS, RunningServer


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "Bearer eops_wrong"}, id="wrong"),
        pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="not-bearer"),
        pytest.param({"Authorization": "Bearer"}, id="scheme-only"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/functions", "/v1/invocations", "/v1/invocations/inv-x"])
def test_v1_needs_a_valid_token(gateway: RunningServer, headers: dict[str, str], path: str) -> None:
    response = httpx.get(gateway.url + path, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "unauthorized"
    assert "eops token create" in error["message"]


def test_a_created_token_works_at_once(gateway: RunningServer) -> None:
    done = subprocess.run(
        [EOPS, "token", "create", "--data-dir", str(gateway.data_dir), "--name", "test"],
        capture_output=True,
        text=True,
        check=True,
    )
    token = done.stdout.strip()
    assert token.startswith("eops_")
    with gateway.client(token) as client:
        assert client.get("/v1/functions").status_code == 200
    assert token not in (gateway.data_dir / "eops.db").read_bytes().decode("latin-1"), (
        "only hashes are stored"
    )


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"])
def test_probes_and_docs_need_no_token(gateway: RunningServer, path: str) -> None:
    assert httpx.get(gateway.url + path).status_code == 200


def test_metrics_name_the_promised_series(gateway: RunningServer) -> None:
    text = httpx.get(gateway.url + "/metrics").text
    for series in (
        'eops_invocations{state="queued"}',
        "eops_queue_depth",
        "eops_gpus_in_use",
        "eops_time_to_start_seconds_bucket",
        "eops_invocation_duration_seconds",
        "eops_accept_latency_seconds_bucket",
        "eops_store_commit_writes_bucket",
    ):
        assert series in text
