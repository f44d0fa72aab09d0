"""The quota reading runs gcloud as a process: here a stand-in script with gcloud's output shape
(a real process, no cloud account), then the check compares it with the planned peak."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from elasticityops.ops.doctor.checks import Status, run_checks
from elasticityops.ops.doctor.gather import GatherOptions, read_quota
from elasticityops.ops.doctor.snapshot import ClusterSnapshot

REGION = {
    "name": "us-central1",
    "quotas": [
        {"metric": "NVIDIA_T4_GPUS", "limit": 64.0, "usage": 4.0},
        {"metric": "CPUS", "limit": 2400.0, "usage": 10.0},
    ],
}


def fake_gcloud(tmp_path: Path, body: str) -> str:
    script = tmp_path / "gcloud"
    script.write_text("#!/usr/bin/env bash\n" + body)
    script.chmod(0o755)
    return str(script)


def test_quota_below_peak_fails_with_the_amount_to_request(tmp_path: Path) -> None:
    answer = tmp_path / "region.json"
    answer.write_text(json.dumps(REGION))
    gcloud = fake_gcloud(
        tmp_path,
        f"""case "$1 $2" in
  "config get-value") echo my-proj-1 ;;
  "compute regions") [[ "$4" == us-central1 && "$6" == my-proj-1 ]] || exit 3; cat {answer} ;;
  *) exit 2 ;;
esac
""",
    )
    reading = asyncio.run(read_quota(GatherOptions(gcloud=gcloud), node_region="us-central1"))
    assert (reading.project, reading.region, reading.error) == ("my-proj-1", "us-central1", "")
    assert reading.limits["NVIDIA_T4_GPUS"] == (64.0, 4.0)
    findings = run_checks(ClusterSnapshot(api_reachable=False, api_error="x", quota=reading, peak=4000))
    quota = next(f for f in findings if f.check == "gpu-quota")
    assert quota.status is Status.fail
    assert "64, below the planned peak of 4000" in quota.message
    assert "request 4500" in quota.fix


def test_gcloud_error_is_a_warning_with_its_message(tmp_path: Path) -> None:
    gcloud = fake_gcloud(
        tmp_path,
        'echo "ERROR: (gcloud.compute.regions.describe) You do not currently have" >&2\n'
        'echo "an active account selected." >&2\nexit 1\n',
    )
    reading = asyncio.run(
        read_quota(GatherOptions(gcloud=gcloud, project="my-proj-1"), node_region="us-central1")
    )
    assert "active account" in reading.error
    findings = run_checks(ClusterSnapshot(api_reachable=False, api_error="x", quota=reading, peak=10))
    assert next(f for f in findings if f.check == "gpu-quota").status is Status.warn


@pytest.mark.parametrize(
    ("options", "region"), [(GatherOptions(), "us-central1"), (GatherOptions(region="europe-west4"), "")]
)
def test_without_gcloud_or_target(tmp_path: Path, options: GatherOptions, region: str) -> None:
    reading = asyncio.run(read_quota(options, node_region=region))
    assert not reading.gcloud_found
    no_project = asyncio.run(
        read_quota(replace(options, gcloud=fake_gcloud(tmp_path, "echo\n")), node_region=region)
    )
    assert no_project.target_unknown
