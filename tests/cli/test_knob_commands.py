"""The commands whose options are knob declarations (elasticityops/knobs.py): `plan trace`, `render
gke / elasticity / job / deploy` and `doctor`. Each option is made from its declaration, so --help
shows every knob's default (and variable), a flag builds the dataclass the command renders from,
and a bad value exits 2 naming its flag."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from elasticityops.backends.kubernetes.deploy import DeployOptions
from elasticityops.cli import render_app
from elasticityops.cli.main import app
from elasticityops.knobs import Spec, specs
from elasticityops.ops.doctor.options import GatherOptions
from elasticityops.ops.elasticity.inputs import ElasticityInputs
from elasticityops.ops.gke.inputs import GkeInputs
from elasticityops.planner.synthetic import SyntheticSpec

runner = CliRunner()

GKE_ARGS = ["--project", "my-proj-1", "--region", "us-central1", "--zones", "a", "--peak", "100"]

# command, the knobs it takes (from their declarations), (default, flag) pairs read off literally
COMMANDS = [
    pytest.param(
        ["plan", "trace"],
        list(specs(SyntheticSpec)),
        [("--days", "30"), ("--burst-peak-max", "4000"), ("--burst-duration", "1200")],
        id="plan-trace",
    ),
    pytest.param(
        ["render", "gke"],
        list(specs(GkeInputs)),
        [
            ("--baseline", "60"),
            ("--margin", "10"),
            ("--fallback-gpu-type", "nvidia-l4"),
            ("--machine-type", "n1-standard-4 for T4, g2-standard-4 for L4"),
        ],
        id="render-gke",
    ),
    pytest.param(
        ["render", "elasticity"],
        list(specs(ElasticityInputs)),
        [
            ("--min", "1"),
            ("--max", "8"),
            ("--grace-seconds", "120"),
            ("--gpu-node-label", "nvidia.com/gpu.present=true"),
            ("--prometheus-url", "http://prometheus-server.monitoring.svc"),
        ],
        id="render-elasticity",
    ),
    pytest.param(
        ["render", "job"],
        render_app.JOB_KNOBS,
        [
            ("--namespace", "elasticityops"),
            ("--kube-instance", "default"),
            ("--kube-image-pull-policy", "IfNotPresent"),
        ],
        id="render-job",
    ),
    pytest.param(
        ["render", "deploy"],
        [*render_app.DEPLOY_OWN, *render_app.DEPLOY_KUBE],
        [
            ("--image", "ghcr.io/elasticityops/eops:0.1.0"),
            ("--storage", "1Gi"),
            ("--namespace", "elasticityops"),
        ],
        id="render-deploy",
    ),
    pytest.param(
        ["doctor"],
        list(specs(GatherOptions)),
        [("--timeout", "10"), ("--gpu-type", "nvidia-tesla-t4")],
        id="doctor",
    ),
]


def _options(help_text: str) -> dict[str, str]:
    """Each option of a --help screen and the text of its row(s), wrapped lines joined."""
    rows: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        found = re.match(r"│\s+(?:\*\s+)?(--[a-z0-9-]+)", line)
        if found:
            current = found.group(1)
            rows[current] = line
        elif current is not None and line.startswith("│"):
            rows[current] += " " + line.strip("│ ")
        else:
            current = None
    return rows


@pytest.mark.parametrize(("command", "knobs", "literal"), COMMANDS)
def test_help_shows_every_knob_with_its_default_and_variable(
    command: list[str], knobs: list[Spec], literal: list[tuple[str, str]]
) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    rows = _options(result.output)
    assert knobs
    for knob in knobs:
        row = rows[knob.flag]
        if knob.is_bool:
            # Typer shows the default as the flag that gives it: --x when on, --no-x when off.
            shown = knob.name if knob.default else (knob.off_flag or "").removeprefix("--")
            assert knob.off_flag is None or f"[default: {shown}]" in row, row
        else:
            assert f"[default: {knob.default_text}]" in row, row
        assert knob.env is None or f"[env var: {knob.env}]" in row, row
    for flag, default in literal:
        assert f"[default: {default}]" in rows[flag], rows[flag]


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        pytest.param(["plan", "trace", "--out", "t.csv", "--days", "0"], "--days", ">0", id="plan-trace"),
        pytest.param(["render", "gke", *GKE_ARGS, "--margin", "lots"], "--margin", "whole number", id="gke"),
        pytest.param(
            ["render", "elasticity", "--deployment", "infer", "--target-util", "70%"],
            "--target-util",
            "whole number",
            id="elasticity",
        ),
        pytest.param(
            ["render", "job", "fn.yaml", "--kube-image-pull-policy", "Sometimes"],
            "--kube-image-pull-policy",
            "one of: Always, IfNotPresent, Never",
            id="job",
        ),
        pytest.param(["render", "deploy", "--gpu-budget", "-1"], "--gpu-budget", "0 to 1000000", id="deploy"),
        pytest.param(["doctor", "--timeout", "0"], "--timeout", ">0", id="doctor"),
    ],
)
def test_a_bad_value_exits_2_naming_its_flag(
    argv: list[str], flag: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fn.yaml").write_text("name: embed\nimage: worker:1\ncommand: [python, w.py]\n")
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert f"{flag}: invalid value" in result.output
    assert words in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "t.csv").exists()


def test_trace_flags_build_the_spec_and_cross_checks_stay(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    argv = ["plan", "trace", "--out", str(out), "--days", "0.05", "--seed", "3", "--bursts-per-day", "0"]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "over 0.05 days" in result.output
    assert "burst" not in out.read_text()
    swapped = runner.invoke(app, [*argv, "--baseline-min", "200", "--baseline-max", "100"])
    assert swapped.exit_code == 2
    assert "--baseline-min must be <= --baseline-max" in swapped.output


def test_elasticity_flags_reach_the_render() -> None:
    result = runner.invoke(
        app,
        [
            "render",
            "elasticity",
            "--deployment",
            "infer",
            "--selector",
            "app=infer,tier=gpu",
            "--gpu-node-label",
            "gpu",
            "--min",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    hpa = result.output.split("# ===== hpa.yaml =====")[1].split("# =====")[0]
    assert yaml.safe_load_all(hpa)
    assert "minReplicas: 2" in hpa
    assert "tier: gpu" in result.output
    assert "key: gpu\n" in result.output


def test_gke_machine_follows_the_gpu_unless_given() -> None:
    l4 = runner.invoke(
        app, ["render", "gke", *GKE_ARGS, "--gpu-type", "nvidia-l4", "--fallback-gpu-type", "none"]
    )
    assert l4.exit_code == 0, l4.output
    assert "--machine-type g2-standard-4" in l4.output
    assert "nvidia-tesla-t4" not in l4.output
    assert GkeInputs("p", "r", (), 1).machine == "n1-standard-4"
    assert GkeInputs("p", "r", (), 1, gpu_type="nvidia-l4").machine == "g2-standard-4"
    assert GkeInputs("p", "r", (), 1, machine_type="n1-standard-8").machine == "n1-standard-8"


def test_render_job_reads_the_backend_variables_a_flag_wins(tmp_path: Path) -> None:
    fn = tmp_path / "fn.yaml"
    fn.write_text("name: embed\nimage: worker:1\ncommand: [python, w.py]\n")
    env = {"EOPS_KUBE_NAMESPACE": "from-env", "EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS": "60"}
    result = runner.invoke(app, ["render", "job", str(fn), "--kube-instance", "blue"], env=env)
    assert result.exit_code == 0, result.output
    job = yaml.safe_load(result.output)
    assert job["metadata"]["namespace"] == "from-env"
    assert job["spec"]["ttlSecondsAfterFinished"] == 60
    flag = runner.invoke(app, ["render", "job", str(fn), "--namespace", "gpu"], env=env)
    assert yaml.safe_load(flag.output)["metadata"]["namespace"] == "gpu"
    bad = runner.invoke(app, ["render", "job", str(fn)], env={"EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS": "-5"})
    assert bad.exit_code == 2
    assert "EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS: invalid value" in bad.output


def test_render_deploy_reads_only_the_variables_its_help_shows() -> None:
    """EOPS_KUBE_QPS is a backend knob that deploy does not take: a bad one there is not read."""
    env = {"EOPS_KUBE_INSTANCE": "blue", "EOPS_KUBE_QPS": "fast"}
    result = runner.invoke(app, ["render", "deploy", "--namespace", "gpu"], env=env)
    assert result.exit_code == 0, result.output
    deployment = next(o for o in yaml.safe_load_all(result.output) if o["kind"] == "Deployment")
    container_env = {
        e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert container_env["EOPS_KUBE_INSTANCE"] == "blue"
    assert container_env["EOPS_KUBE_NAMESPACE"] == "gpu"
    assert DeployOptions().kubernetes.namespace == "elasticityops"
