"""The ops commands through Typer: `render gke` / `render elasticity` write what the pure renders
return, refuse bad input with exit 2 naming the option, and `doctor` reports an unreachable API
as a failure (exit 1) in JSON."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import typer
import yaml
from typer.testing import CliRunner

from elasticityops.cli import render_ops
from elasticityops.cli.main import app as root_app

from .manifests import load_documents

runner = CliRunner()


def render_app() -> typer.Typer:
    app = typer.Typer()
    render_ops.register(app)
    return app


def test_render_gke_writes_script_and_manifests(tmp_path: Path) -> None:
    args = [
        "gke",
        "--project",
        "my-proj-1",
        "--region",
        "us-central1",
        "--zones",
        "a,b,c,f",
        "--peak",
        "4000",
    ]
    result = runner.invoke(render_app(), [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["computeclass.yaml", "create-cluster.sh", "nap-config.yaml", "priorityclasses.yaml"]
    script = tmp_path / "create-cluster.sh"
    assert script.stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(script)], check=True)
    nap = yaml.safe_load((tmp_path / "nap-config.yaml").read_text())
    assert {"resourceType": "nvidia-tesla-t4", "minimum": 0, "maximum": 4500} in nap["resourceLimits"]


def test_render_gke_refuses_n1_standard_1() -> None:
    result = runner.invoke(
        render_app(),
        [
            "gke",
            "--project",
            "my-proj-1",
            "--region",
            "us-central1",
            "--zones",
            "a",
            "--peak",
            "10",
            "--machine-type",
            "n1-standard-1",
        ],
    )
    assert result.exit_code == 2
    assert "--machine-type" in result.output
    assert "n1-standard-4" in result.output


def test_render_gke_warns_when_zones_are_short() -> None:
    result = runner.invoke(
        render_app(),
        ["gke", "--project", "my-proj-1", "--region", "us-central1", "--zones", "a,b,c", "--peak", "4000"],
    )
    assert result.exit_code == 0
    assert "need 4 pool-zones" in result.output


def test_render_elasticity_to_stdout_round_trips() -> None:
    result = runner.invoke(
        render_app(), ["elasticity", "--deployment", "infer", "--namespace", "serving", "--max", "12"]
    )
    assert result.exit_code == 0, result.output
    sections = result.output.split("# ===== ")
    assert {s.split(" =====")[0] for s in sections if s} == {
        "device-plugin-values.yaml",
        "device-plugin.yaml",
        "dcgm-exporter.yaml",
        "prometheus-adapter-values.yaml",
        "hpa.yaml",
        "deployment-patch.yaml",
    }
    hpa_text = next(s for s in sections if s.startswith("hpa.yaml")).split("\n", 1)[1]
    hpa = load_documents(hpa_text)[0]
    assert hpa["spec"]["maxReplicas"] == 12


def test_render_elasticity_refuses_bad_min() -> None:
    result = runner.invoke(render_app(), ["elasticity", "--deployment", "infer", "--min", "0"])
    assert result.exit_code == 2
    assert "--min" in result.output


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_doctor_unreachable_api_fails_with_json(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{_closed_port()}"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    # A real process, as an operator runs it.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "elasticityops.cli.main",
            "doctor",
            "--kubeconfig",
            str(kubeconfig),
            "--json",
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert report["findings"][0]["check"] == "api"
    assert report["findings"][0]["status"] == "fail"
    assert "--kubeconfig" in report["findings"][0]["fix"]


def test_doctor_refuses_missing_kubeconfig(tmp_path: Path) -> None:
    result = runner.invoke(root_app, ["doctor", "--kubeconfig", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "--kubeconfig" in result.output


def test_render_commands_are_registered_under_eops_render() -> None:
    result = runner.invoke(root_app, ["render", "elasticity", "--deployment", "infer", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    assert "queue depth" in result.output


def test_render_gke_picks_the_machine_for_the_gpu() -> None:
    args = ["gke", "--project", "my-proj-1", "--region", "us-central1", "--zones", "a", "--peak", "100"]
    result = runner.invoke(
        render_app(), [*args, "--gpu-type", "nvidia-l4", "--fallback-gpu-type", "nvidia-tesla-t4"]
    )
    assert result.exit_code == 0, result.output
    assert "--machine-type g2-standard-4" in result.output
