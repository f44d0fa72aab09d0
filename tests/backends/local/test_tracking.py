"""Process tracking: what a run dir's started.json may make the gateway kill."""

from __future__ import annotations

from pathlib import Path

from elasticityops.backends.local import tracking


def test_a_cgroup_named_in_started_json_must_be_the_jobs_own(tmp_path: Path) -> None:
    forged = tmp_path / "eops-inv-1"  # a directory with a cgroup's name, outside any cgroup mount
    forged.mkdir()
    assert tracking.job_cgroup(str(forged), "eops-inv-1") is None
    assert tracking.job_cgroup(None, "eops-inv-1") is None
    assert tracking.job_cgroup("/sys/fs/cgroup/../../tmp/eops-inv-1", "eops-inv-1") is None
    mount = tracking._cgroup2_mount()
    if mount is not None:
        real = f"{mount[1]}/eops-inv-1"
        assert tracking.job_cgroup(real, "eops-inv-1") == Path(real)
        assert tracking.job_cgroup(real, "eops-inv-2") is None
