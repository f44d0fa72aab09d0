"""The rendered script, run by bash with stand-in `gcloud` and `kubectl` on PATH that record their
arguments: the quota gate stops it before anything is created, and with enough quota every step
runs in order with the rendered files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from elasticityops.ops.gke.inputs import GkeInputs
from elasticityops.ops.gke.render import render_gke

INPUTS = GkeInputs(
    project="my-proj-1", region="us-central1", zones=("us-central1-a", "us-central1-b"), peak=400, baseline=6
)

STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
if [[ "$(basename "$0")" == gcloud && "$*" == *"regions describe"* ]]; then echo "$QUOTA"; fi
if [[ "$(basename "$0")" == kubectl && "$1" == api-resources && "$HAS_CRD" == 1 ]]; then
  echo computeclasses.cloud.google.com
fi
"""


def run_script(
    tmp_path: Path, quota: str, has_crd: bool
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp_path / "out"
    out.mkdir()
    for name, text in render_gke(INPUTS).files.items():
        (out / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcloud", "kubectl"):
        (bin_dir / tool).write_text(STAND_IN)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "QUOTA": quota,
        "HAS_CRD": "1" if has_crd else "0",
    }
    done = subprocess.run(
        ["bash", str(out / "create-cluster.sh")], env=env, capture_output=True, text=True, check=False
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_too_little_quota_stops_before_anything_is_created(tmp_path: Path) -> None:
    done, calls = run_script(tmp_path, quota="64.0", has_crd=True)
    assert done.returncode != 0
    assert "quota NVIDIA_T4_GPUS in us-central1 is 64, need 450" in done.stderr
    assert not any("clusters create" in call for call in calls)


@pytest.mark.parametrize("has_crd", [True, False], ids=["computeclass-crd", "no-crd"])
def test_with_quota_every_step_runs_in_order(tmp_path: Path, has_crd: bool) -> None:
    done, calls = run_script(tmp_path, quota="100000.0", has_crd=has_crd)
    assert done.returncode == 0, done.stderr
    steps = [
        "gcloud services enable",
        "gcloud container clusters create eops",
        "gcloud container node-pools create eops-baseline",
        "gcloud container clusters get-credentials eops",
        "kubectl apply -f",
    ]
    positions = [next(i for i, call in enumerate(calls) if call.startswith(step)) for step in steps]
    assert positions == sorted(positions)
    create = next(call for call in calls if call.startswith("gcloud container clusters create"))
    assert "--autoprovisioning-config-file" in create
    assert "--node-locations us-central1-a,us-central1-b" in create
    pool = next(call for call in calls if call.startswith("gcloud container node-pools create"))
    assert "--num-nodes 3" in pool
    assert "type=nvidia-tesla-t4,count=1,gpu-driver-version=latest" in pool
    applied = [call for call in calls if call.startswith("kubectl apply")]
    assert any(call.endswith("priorityclasses.yaml") for call in applied)
    assert any(call.endswith("computeclass.yaml") for call in applied) is has_crd
