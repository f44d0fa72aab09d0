"""What `eops` says when it cannot do what was asked: no gateway, no token, a wrong token; and
`--help` on every command of the client side."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from elasticityops.cli.main import app

from .runner import Eops


def test_connection_refused_names_the_url_and_how_to_start_the_server(server_less: Eops) -> None:
    result = server_less("fn", "ls")
    assert result.code == 1
    url = server_less.extra["EOPS_URL"]
    assert result.stderr.startswith(
        f"error: cannot reach the ElasticityOps gateway at {url} (connection refused)"
    )
    assert "eops serve" in result.stderr
    assert "EOPS_URL" in result.stderr
    assert "Traceback" not in result.output


def test_missing_token_says_how_to_get_one(eops: Eops) -> None:
    result = eops("ls", drop=("EOPS_TOKEN",))
    assert result.code == 1
    assert "EOPS_TOKEN is not set" in result.stderr
    assert "eops token create" in result.stderr
    assert "Traceback" not in result.output


def test_wrong_token_is_reported_as_refused(eops: Eops) -> None:
    result = eops("fn", "ls", env={"EOPS_TOKEN": "eops_not-a-real-token"})
    assert result.code == 1
    assert "the token in EOPS_TOKEN was refused" in result.stderr


def test_unknown_state_is_a_usage_error(server_less: Eops) -> None:
    result = server_less("ls", "--state", "sleeping")
    assert result.code == 2
    assert "'sleeping' is not one of" in result.stderr


@pytest.mark.parametrize(
    ("command", "says"),
    [
        pytest.param(("fn",), "deploy", id="fn"),
        pytest.param(("fn", "deploy"), "validated here first", id="fn-deploy"),
        pytest.param(("fn", "ls"), "List the deployed functions", id="fn-ls"),
        pytest.param(("fn", "get"), "its spec as YAML", id="fn-get"),
        pytest.param(("fn", "rm"), "--force", id="fn-rm"),
        pytest.param(("invoke",), "--idempotency-key", id="invoke"),
        pytest.param(("status",), "where its time went", id="status"),
        pytest.param(("logs",), "--follow", id="logs"),
        pytest.param(("cancel",), "process group", id="cancel"),
        pytest.param(("ls",), "--cursor", id="ls"),
    ],
)
def test_every_command_has_help(command: tuple[str, ...], says: str) -> None:
    # In-process: help text needs no gateway, and thirty subprocess starts would only add time.
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert says in result.output
