"""Settings: defaults, then EOPS_* variables, then CLI flags; bad values name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from elasticityops.domain.errors import InvalidInput
from elasticityops.settings import load_settings


def test_defaults() -> None:
    settings = load_settings(env={})
    assert settings.port == 8080
    assert settings.api.max_payload_bytes == 1024 * 1024
    assert settings.local.gpus is None
    assert settings.database_url.endswith("/eops.db")


def test_env_then_flags(tmp_path: Path) -> None:
    env = {
        "EOPS_PORT": "9000",
        "EOPS_DATA_DIR": str(tmp_path),
        "EOPS_GPUS": "4",
        "EOPS_DISPATCH_PAUSED": "true",
        "EOPS_MAX_WAIT_SECONDS": "30",
    }
    settings = load_settings(env=env, overrides={"port": 9100, "local.gpus": None})
    assert settings.port == 9100, "a flag wins over the environment"
    assert settings.local.gpus == 4, "an unset flag leaves the environment's value"
    assert settings.dispatch.paused is True
    assert settings.api.max_wait_seconds == 30
    assert settings.database_url == f"sqlite:///{tmp_path / 'eops.db'}"
    assert settings.callback_base_url == "http://127.0.0.1:9100"


def test_a_wildcard_host_gives_jobs_a_reachable_callback_url() -> None:
    assert load_settings(env={"EOPS_HOST": "0.0.0.0"}).callback_base_url == "http://127.0.0.1:8080"
    public = load_settings(env={"EOPS_PUBLIC_URL": "https://eops.example.com/"})
    assert public.callback_base_url == "https://eops.example.com"


@pytest.mark.parametrize(("var", "value"), [("EOPS_PORT", "eighty"), ("EOPS_DISPATCH_PAUSED", "maybe")])
def test_a_bad_value_names_the_variable(var: str, value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={var: value})
    assert caught.value.problems[0].field == var
