"""/metrics behind a scrape token (issue 37): it exports cost by function, which /v1/cost shows
to admins only. With EOPS_METRICS_TOKEN set, a real gateway answers /metrics only to that token
or an admin API token, over HTTP; without one it stays open (tests/api/test_auth.py). A token
that could be guessed, or that no header can carry, stops start-up naming the knob."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from elasticityops.domain.errors import InvalidInput
from elasticityops.settings import load_settings
from helpers.server import EOPS, RunningServer, base_env, running_server

SCRAPE_TOKEN = "scrape-0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(
        tmp_path_factory.mktemp("scrape"), "--gpus", "1", env={"EOPS_METRICS_TOKEN": SCRAPE_TOKEN}
    ) as server:
        yield server


def _invoke_token(gw: RunningServer) -> str:
    with gw.client() as client:
        created = client.post("/v1/tokens", json={"name": "caller", "scope": "invoke"})
    assert created.status_code == 201, created.text
    token: str = created.json()["token"]
    return token


def _scrape(gw: RunningServer, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{gw.url}/metrics", headers=headers, timeout=10)


def test_the_scrape_token_and_an_admin_token_read_metrics(gw: RunningServer) -> None:
    for token in (SCRAPE_TOKEN, gw.token):
        answer = _scrape(gw, token)
        assert answer.status_code == 200, answer.text
        assert "eops_invocation_cost_dollars" in answer.text
        assert answer.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize("who", ["nobody", "wrong", "invoke-token", "basic", "one-char-short"])
def test_anyone_else_gets_401_naming_the_knob(gw: RunningServer, who: str) -> None:
    token = {
        "nobody": None,
        "wrong": "scrape-ffffffffffffffffffffffffffffffff",
        "invoke-token": _invoke_token(gw) if who == "invoke-token" else None,
        "basic": None,
        "one-char-short": SCRAPE_TOKEN[:-1],
    }[who]
    headers = {"Authorization": "Basic dXNlcjpwYXNz"} if who == "basic" else {}
    if token is not None:
        headers = {"Authorization": f"Bearer {token}"}
    answer = httpx.get(f"{gw.url}/metrics", headers=headers, timeout=10)
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"] == "Bearer"
    error = answer.json()["error"]
    assert error["code"] == "unauthorized"
    assert "EOPS_METRICS_TOKEN" in error["message"]
    assert "eops_" not in answer.text


def test_probes_stay_open_with_a_scrape_token(gw: RunningServer) -> None:
    for path in ("/healthz", "/readyz"):
        assert httpx.get(gw.url + path, timeout=10).status_code == 200


def test_the_scrape_token_is_not_printed(gw: RunningServer) -> None:
    assert SCRAPE_TOKEN not in gw.output()


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        pytest.param("short", "16 to 4096 characters, not 5", id="too-short"),
        pytest.param("x" * 4097, "16 to 4096 characters, not 4097", id="too-long"),
        pytest.param("has spaces in it 0123456789", "a bearer token's characters", id="space"),
        pytest.param("tökén-0123456789abcdef", "a bearer token's characters", id="non-ascii"),
    ],
)
def test_a_bad_scrape_token_is_refused_naming_the_knob(raw: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={"EOPS_METRICS_TOKEN": raw})
    [problem] = caught.value.problems
    assert problem.field == "EOPS_METRICS_TOKEN"
    assert words in problem.problem
    assert "openssl rand -hex 32" in problem.problem
    assert raw not in problem.render(), "a secret is not echoed"


def test_serve_refuses_a_short_scrape_token_before_it_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [EOPS, "serve", "--data-dir", str(tmp_path), "--port", "0", "--metrics-token", "pass"],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--metrics-token" in done.stderr
    assert "16 to 4096 characters" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        pytest.param({"EOPS_HOST": "0.0.0.0"}, True, id="wildcard-no-token"),
        pytest.param(
            {"EOPS_HOST": "0.0.0.0", "EOPS_METRICS_TOKEN": SCRAPE_TOKEN}, False, id="wildcard-token"
        ),
        pytest.param({"EOPS_HOST": "127.0.0.1"}, False, id="loopback"),
    ],
)
def test_the_banner_says_when_metrics_are_open_beyond_loopback(env: dict[str, str], warned: bool) -> None:
    from elasticityops.cli.serve import _banner

    text = _banner(load_settings(env=env), "eops_x", created=True, deployed=[])
    assert ("/metrics (cost by function) is open" in text) is warned
    assert SCRAPE_TOKEN not in text
