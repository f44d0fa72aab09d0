"""--leader-elect and the lease timings: declared once as knobs, refused at start (exit 2, the
flag named, no traceback) where they cannot work."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from elasticityops.cli.main import app
from elasticityops.domain.errors import InvalidInput
from elasticityops.settings import load_settings

runner = CliRunner()
PG = ["--backend", "kubernetes", "--database-url", "postgresql+psycopg://eops@127.0.0.1:1/eops"]


def test_off_by_default_with_client_go_timings() -> None:
    settings = load_settings(env={})
    assert settings.leader.leader_elect is False
    assert (settings.leader.lease_duration_s, settings.leader.renew_deadline_s) == (15, 10.0)
    assert settings.leader.retry_period_s == 2.0
    assert settings.leader.lease_name == "elasticityops"


def test_the_variables_are_read() -> None:
    env = {
        "EOPS_LEADER_ELECT": "true",
        "EOPS_BACKEND": "kubernetes",
        "EOPS_DATABASE_URL": "postgresql+psycopg://eops@db/eops",
        "EOPS_LEADER_IDENTITY": "eops-7c9f-2xk4p",
        "EOPS_LEASE_DURATION": "3",
        "EOPS_LEASE_RENEW_DEADLINE": "2",
        "EOPS_LEASE_RETRY_PERIOD": "0.5",
    }
    leader = load_settings(env=env).leader
    assert leader.leader_elect
    assert leader.identity == "eops-7c9f-2xk4p"
    assert (leader.lease_duration_s, leader.renew_deadline_s, leader.retry_period_s) == (3, 2.0, 0.5)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(
            ["--leader-elect"],
            [
                "--leader-elect / EOPS_LEADER_ELECT: leader election is for --backend kubernetes, not local",
                "its data dir is locked by one gateway",
                "SQLite is one file, locked by one gateway",
            ],
            id="local backend and SQLite",
        ),
        pytest.param(
            ["--leader-elect", "--backend", "kubernetes"],
            ["SQLite is one file"],
            id="SQLite",
        ),
        pytest.param(
            [*PG, "--leader-elect", "--lease-duration", "10", "--lease-renew-deadline", "10"],
            [
                "--lease-renew-deadline / EOPS_LEASE_RENEW_DEADLINE: "
                "the renew deadline (10 s) must be shorter than the lease duration (10 s)"
            ],
            id="renew deadline not below the duration",
        ),
        pytest.param(
            [*PG, "--leader-elect", "--lease-retry-period", "9"],
            ["--lease-retry-period / EOPS_LEASE_RETRY_PERIOD: the retry period (9 s) times 1.2"],
            id="retry period too long for the deadline",
        ),
        pytest.param(
            [*PG, "--leader-elect", "--lease-duration", "0"],
            ["--lease-duration: invalid value '0'"],
            id="a duration below 1 s",
        ),
    ],
)
def test_a_combination_that_cannot_work_is_refused_at_start(argv: list[str], said: list[str]) -> None:
    result = runner.invoke(app, ["serve", *argv], env={"EOPS_DATA_DIR": "/nonexistent/eops"})
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    for words in said:
        assert words in text
    assert "Traceback" not in result.output


def test_the_same_settings_without_leader_election_are_fine() -> None:
    settings = load_settings(env={}, given={"lease-retry-period": "9"})
    assert settings.leader.retry_period_s == 9.0
    with pytest.raises(InvalidInput, match="retry period"):
        load_settings(
            env={},
            given={
                **dict.fromkeys(["leader-elect"], "true"),
                "backend": "kubernetes",
                "database-url": "postgresql+psycopg://e@h/d",
                "lease-retry-period": "9",
            },
        )
