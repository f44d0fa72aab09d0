"""Settings: the declared defaults, then EOPS_* variables, then `eops serve` flags. Every knob is
read from its variable and typed by its declared type, a flag wins over its variable, a bad value
stops start-up naming the variable or flag and the fix, and `eops serve --help` shows every
knob's flag, variable and default. The expected lists come from the declarations (so a new knob
is covered without a new test), with a few checked literally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from elasticityops.cli import serve as serve_cli
from elasticityops.cli.main import app
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.errors import EopsError, InvalidInput
from elasticityops.knobs import Spec, specs
from elasticityops.settings import Settings, load_settings
from helpers.cli_help import option_rows

KNOBS = specs(Settings)
runner = CliRunner()


def _get(settings: Settings, knob: Spec) -> Any:
    value: Any = settings
    for part in knob.path.split("."):
        value = getattr(value, part)
    return value


def _sample(knob: Spec) -> tuple[str, Any]:
    """A valid value other than the default, as a variable would hold it, and typed as expected."""
    if "choices" in knob.about:
        choice = next(c for c in knob.about["choices"] if c != knob.default)
        return choice, choice
    if knob.base is bool:
        return ("false", False) if knob.default else ("true", True)
    if knob.base is int:
        number = int(knob.about.get("ge", 0)) + 7
        return str(number), number
    if knob.base is float:
        return "2.5", 2.5
    if knob.base is Path:
        return "/srv/eops-test", Path("/srv/eops-test")
    if knob.base is GpuBudget:
        return "nvidia-l4=3", GpuBudget(per_type=(("nvidia-l4", 3),))
    if knob.env == "EOPS_HEADROOM":  # a policy in the planner's syntax
        return "warm:2", "warm:2"
    if knob.env == "EOPS_KUBE_WORKERS":  # MultiKueue's workers: NAME=KUBECONFIG, a readable file
        return f"worker-1={__file__}", f"worker-1={__file__}"
    if knob.env == "EOPS_METRICS_TOKEN":  # a scrape token: 16 characters at least
        return "scrape-token-0123456789", "scrape-token-0123456789"
    return "sample-text", "sample-text"


def test_every_knob_that_serve_reads_has_a_variable() -> None:
    assert [k.path for k in KNOBS if k.env is None] == []
    names = [k.name for k in KNOBS]
    assert len(set(names)) == len(names), "two knobs with one flag"
    assert "kubernetes.max_gpus" not in {k.path for k in KNOBS}, "one GPU cap: EOPS_GPU_BUDGET"


# Leader election is refused where it cannot work (settings.election_problems): read it where it can.
_WHERE_IT_WORKS = {
    "EOPS_LEADER_ELECT": {
        "EOPS_BACKEND": "kubernetes",
        "EOPS_DATABASE_URL": "postgresql+psycopg://e@db/eops",
    },
    "EOPS_ADMISSION": {"EOPS_BACKEND": "kubernetes"},
    "EOPS_KUBE_LOCAL_QUEUE": {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue"},
    "EOPS_KUBE_WORKERS": {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue"},
    "EOPS_KUBE_NOMINATE_WAIT": {
        "EOPS_BACKEND": "kubernetes",
        "EOPS_ADMISSION": "kueue",
        "EOPS_KUBE_WORKERS": f"worker-1={__file__}",
    },
}


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.env)
def test_each_variable_is_read_and_typed(knob: Spec) -> None:
    raw, expected = _sample(knob)
    assert knob.env is not None
    value = _get(load_settings(env={**_WHERE_IT_WORKS.get(knob.env, {}), knob.env: raw}), knob)
    assert value == expected
    assert type(value) is type(expected)
    assert _get(load_settings(env={knob.env: ""}), knob) == knob.default, "empty counts as unset"


def test_a_flag_wins_over_its_variable_and_an_unset_flag_leaves_it(tmp_path: Path) -> None:
    env = {"EOPS_PORT": "9000", "EOPS_DATA_DIR": str(tmp_path), "EOPS_GPUS": "4"}
    settings = load_settings(env=env, given={"port": "9100"})
    assert settings.port == 9100
    assert settings.local.gpus == 4
    assert settings.database_url == f"sqlite:///{tmp_path / 'eops.db'}"
    assert settings.callback_base_url == "http://127.0.0.1:9100"


def test_serve_passes_flags_and_variables_to_the_gateway(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Through Typer: flags typed, variables set, and nothing else, reach the settings."""
    seen: list[Settings] = []

    async def stop_here(settings: Settings, example: bool) -> tuple[str, bool, list[str]]:
        seen.append(settings)
        raise EopsError("stopped by the test")

    monkeypatch.setattr(serve_cli, "_prepare", stop_here)
    env = {"EOPS_DATA_DIR": str(tmp_path), "EOPS_PORT": "9000", "EOPS_MAX_WAIT_SECONDS": "30"}
    args = ["serve", "--port", "9100", "--cold-start-seconds", "3", "--gpu-budget", "6", "--paused"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    [settings] = seen
    assert (settings.port, settings.api.max_wait_seconds, settings.data_dir) == (9100, 30, tmp_path)
    assert settings.local.slot_provision_delay_s == 3.0
    assert settings.dispatch.gpu_budget == GpuBudget(total=6)
    assert settings.dispatch.paused is True
    assert settings.kubernetes == Settings().kubernetes, "untyped flags do not override anything"


def test_a_wildcard_host_gives_jobs_a_reachable_callback_url() -> None:
    assert load_settings(env={"EOPS_HOST": "0.0.0.0"}).callback_base_url == "http://127.0.0.1:8080"
    public = load_settings(env={"EOPS_PUBLIC_URL": "https://eops.example.com/"})
    assert public.callback_base_url == "https://eops.example.com"


@pytest.mark.parametrize(
    ("var", "value", "fix"),
    [
        ("EOPS_PORT", "eighty", "a whole number 0 to 65535 (default: 8080)"),
        ("EOPS_PORT", "70000", "a whole number 0 to 65535"),
        ("EOPS_GPUS", "-1", "a whole number 0 to 1024"),
        ("EOPS_GPUS", "1.5", "a whole number"),
        ("EOPS_COLD_START_SECONDS", "nan", "a number 0 to 3600 (default: 0)"),
        ("EOPS_DISPATCH_PAUSED", "maybe", "true or false"),
        ("EOPS_KUBE_QPS", "0", "a number >0, <=100000 (default: 500)"),
        ("EOPS_LOG_LEVEL", "loud", "one of: critical, error, warning, info, debug"),
        ("EOPS_KUBE_IMAGE_PULL_POLICY", "Sometimes", "one of: Always, IfNotPresent, Never"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_fix(var: str, value: str, fix: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={var: value})
    [problem] = caught.value.problems
    assert problem.field == var
    assert repr(value) in problem.problem
    assert fix in problem.fix


def test_every_bad_value_is_reported_at_once() -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={"EOPS_PORT": "x", "EOPS_GPU_BUDGET": "-2"}, given={"kube-burst": "0"})
    assert {p.field for p in caught.value.problems} == {"EOPS_PORT", "EOPS_GPU_BUDGET", "--kube-burst"}


def test_a_removed_variable_stops_start_up_naming_its_replacement() -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={"EOPS_KUBE_MAX_GPUS": "8"})
    [problem] = caught.value.problems
    assert problem.field == "EOPS_KUBE_MAX_GPUS"
    assert "EOPS_GPU_BUDGET" in problem.fix
    assert "--gpu-budget" in problem.fix
    result = runner.invoke(app, ["serve"], env={"EOPS_KUBE_MAX_GPUS": "8"})
    assert result.exit_code == 2
    assert "EOPS_GPU_BUDGET" in result.output


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--port", "eighty"], {}, "--port: invalid value 'eighty'; use a whole number 0 to 65535"),
        ([], {"EOPS_PORT": "eighty"}, "EOPS_PORT: invalid value 'eighty'"),
        (["--backend", "nope"], {}, "--backend: unknown backend 'nope'; use one of: kubernetes, local"),
        ([], {"EOPS_BACKEND": "nope"}, "EOPS_BACKEND: unknown backend"),
        (["--kubeconfig", "/no/such/file"], {}, "--kubeconfig: /no/such/file is not a file"),
        # issue 37: it never finished starting, ignored SIGTERM and held a core
        (["--headroom", "warm:99999999999999999999"], {}, "node count from 0 to 100,000"),
        (["--headroom", "scheduled:08:00=100001"], {}, "each count from 0 to 100,000"),
        (["--headroom", "predictive:1e308"], {}, "wait from 0 to 3600 seconds"),
        (["--headroom", "predictive:inf"], {}, "wait from 0 to 3600 seconds"),
    ],
)
def test_serve_refuses_a_bad_value_with_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], needle: str
) -> None:
    result = runner.invoke(app, ["serve", "--data-dir", str(tmp_path), *args], env=env)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("raw", "budget"),
    [
        ("6", GpuBudget(total=6)),
        (" 0 ", GpuBudget(total=0)),
        (
            "nvidia-tesla-t4=4500,nvidia-l4=200",
            GpuBudget(per_type=(("nvidia-tesla-t4", 4500), ("nvidia-l4", 200))),
        ),
        ("nvidia-l4 = 0", GpuBudget(per_type=(("nvidia-l4", 0),))),
    ],
)
def test_the_gpu_budget_is_one_number_or_one_per_gpu_type(raw: str, budget: GpuBudget) -> None:
    assert load_settings(env={"EOPS_GPU_BUDGET": raw}).dispatch.gpu_budget == budget
    assert load_settings(given={"gpu-budget": raw}).dispatch.gpu_budget == budget
    assert budget.render().replace(" ", "") == raw.replace(" ", "")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        pytest.param(
            "nvidia-tesla-k80=4",
            "unknown GPU type 'nvidia-tesla-k80'; use one of: nvidia-tesla-t4",
            id="unknown-type",
        ),
        pytest.param("nvidia-l4=two", "'two' for nvidia-l4 is not a whole number", id="not-a-number"),
        pytest.param("nvidia-l4=1.5", "'1.5' for nvidia-l4 is not a whole number", id="not-whole"),
        pytest.param(
            "nvidia-l4=-1", "'-1' for nvidia-l4 is not a whole number 0 to 1000000", id="negative-per-type"
        ),
        pytest.param("-2", "'-2' is not a whole number 0 to 1000000", id="negative-total"),
        pytest.param("nvidia-l4=1,nvidia-l4=2", "nvidia-l4 is given twice", id="duplicate"),
        pytest.param("nvidia-l4=1,,nvidia-tesla-t4=2", "an empty item", id="empty-item"),
        pytest.param("nvidia-l4=1,", "an empty item", id="trailing-comma"),
        pytest.param("8,nvidia-l4=2", "'8' has no GPU type", id="number-and-types"),
        pytest.param("=3", "unknown GPU type ''", id="no-type"),
    ],
)
def test_a_malformed_gpu_budget_is_refused_at_start_naming_the_flag(
    tmp_path: Path, raw: str, why: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_settings(env={"EOPS_GPU_BUDGET": raw})
    [problem] = caught.value.problems
    assert problem.field == "EOPS_GPU_BUDGET"
    assert why in problem.problem
    result = runner.invoke(app, ["serve", "--data-dir", str(tmp_path), "--gpu-budget", raw])
    assert result.exit_code == 2
    assert f"--gpu-budget: invalid value {raw!r}" in result.output
    assert "Traceback" not in result.output


def test_serve_help_shows_every_knob_with_its_variable_and_default() -> None:
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    rows = option_rows(result.output)
    for knob in KNOBS:
        row = rows[knob.flag]
        assert f"[env var: {knob.env}]" in row
        if knob.is_bool and not knob.default:
            assert knob.off_flag is not None
            shown = knob.off_flag.removeprefix("--")
        else:
            shown = knob.default_text
        assert f"[default: {shown}]" in row, row
        assert knob.help.rstrip(".") in row  # as written: Rich markup takes no bracket of it


def test_serve_help_reads_in_100_columns() -> None:
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = result.output
    assert "[env var: EOPS_PORT]" in text
    assert "[default: 8080]" in text
    assert "[env var: EOPS_COLD_START_SECONDS]" in text
    assert "--max-wait-seconds" in text
    assert "EOPS_KUBE_MAX_GPUS" not in text
    assert "…" not in text, "a flag, variable or default cut short"
    assert max(len(line) for line in text.splitlines()) <= 100


def test_token_create_takes_the_data_dir_and_database_flags() -> None:
    result = runner.invoke(app, ["token", "create", "--help"], env={"COLUMNS": "400"})
    rows = option_rows(result.output)
    assert "[env var: EOPS_DATA_DIR]" in rows["--data-dir"]
    assert "[default: ~/.eops]" in rows["--data-dir"]
    assert "[env var: EOPS_DATABASE_URL]" in rows["--database-url"]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:9000"),
        ("0.0.0.0", "http://127.0.0.1:9000"),
        ("::1", "http://[::1]:9000"),
    ],
)
def test_the_callback_url_is_a_url_for_every_host(host: str, url: str) -> None:
    assert load_settings(env={}, given={"host": host, "port": "9000"}).callback_base_url == url


def test_kueue_admission_submits_to_the_default_local_queue_unless_told() -> None:
    kueue = {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue"}
    assert load_settings(env=kueue).kubernetes.local_queue == "eops"
    assert load_settings(env={**kueue, "EOPS_KUBE_LOCAL_QUEUE": "team-a"}).kubernetes.local_queue == "team-a"
    assert load_settings(env={}).kubernetes.local_queue is None


@pytest.mark.parametrize(
    ("env", "field", "fix"),
    [
        pytest.param(
            {"EOPS_ADMISSION": "kueue"}, "--admission", "add --backend kubernetes", id="local-backend"
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue", "EOPS_GPU_BUDGET": "nvidia-tesla-t4=3"},
            "--gpu-budget",
            "eops render kueue --gpu-budget",
            id="two-owners-of-quota",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue", "EOPS_KUBE_WORKLOAD": "pod"},
            "--kube-workload",
            "--kube-workload job",
            id="bare-pods",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_KUBE_LOCAL_QUEUE": "team-a"},
            "--kube-local-queue",
            "add --admission kueue",
            id="queue-without-kueue",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_KUBE_WORKERS": f"worker-1={__file__}"},
            "--kube-workers",
            "add --admission kueue",
            id="workers-without-kueue",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue", "EOPS_KUBE_WORKERS": "worker-1"},
            "--kube-workers",
            "worker-1=/etc/eops/worker-1.kubeconfig",
            id="worker-without-kubeconfig",
        ),
        pytest.param(
            {
                "EOPS_BACKEND": "kubernetes",
                "EOPS_ADMISSION": "kueue",
                "EOPS_KUBE_WORKERS": "worker-1=/nonexistent/worker-1.kubeconfig",
            },
            "--kube-workers",
            "a readable kubeconfig",
            id="worker-kubeconfig-missing",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_ADMISSION": "kueue", "EOPS_KUBE_NOMINATE_WAIT": "30"},
            "--kube-nominate-wait",
            "--kube-workers NAME=KUBECONFIG",
            id="nominating-without-workers",
        ),
        pytest.param(
            {"EOPS_BACKEND": "kubernetes", "EOPS_KUBE_NOMINATE_WAIT": "30"},
            "--kube-nominate-wait",
            "add --admission kueue",
            id="nominating-without-kueue",
        ),
    ],
)
def test_kueue_admission_is_refused_where_it_cannot_work(env: dict[str, str], field: str, fix: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        load_settings(env=env)
    problems = refused.value.problems
    assert any(p.field.startswith(field) and fix in p.fix for p in problems), problems
