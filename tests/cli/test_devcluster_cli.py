"""`eops dev-cluster` commands that need no running cluster: what they say when there is none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.runner import Eops, Result


def test_kubeconfig_of_a_stopped_cluster_exits_1_and_prints_no_path(tmp_path: Path) -> None:
    # What `eops dev-cluster down` leaves: the kubeconfig, and no recorded processes. A real
    # process (the family's one, runner.py): what $(eops dev-cluster kubeconfig) would capture.
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\\nkind: Config\\n")
    result = Eops(None)("dev-cluster", "kubeconfig", "--state-dir", str(tmp_path))
    assert result.code == 1, result.output
    assert result.stdout == "", "nothing for $(eops dev-cluster kubeconfig) to export"
    assert "no dev cluster is running" in result.stderr
    assert "left from a cluster that was stopped" in result.stderr


def test_kubeconfig_of_an_empty_state_dir_exits_1(tmp_path: Path) -> None:
    result = Eops(None, in_process=True)("dev-cluster", "kubeconfig", "--state-dir", str(tmp_path))
    assert result.code == 1, result.output
    assert result.stdout == ""
    assert "eops dev-cluster up" in result.stderr


def test_up_offers_gke_balanced_scale_ups() -> None:
    result = Eops(None, in_process=True)("dev-cluster", "up", "--help")
    assert result.code == 0, result.output
    assert "--balance-zones" in result.stdout
    assert "BALANCED" in result.stdout


def _a_set(root: Path, workers: int = 2) -> Path:
    """What `up --multikueue` records first: the set's `set.json` (no cluster runs here)."""
    from elasticityops.devcluster.multikueue import SetRecord

    root.mkdir(parents=True, exist_ok=True)
    SetRecord(workers=workers, started_at=0.0).write(root)
    return root


def _refused(result: Result, *names: str) -> None:
    """Bad input: exit 2, one line naming the flag and the fix, no traceback."""
    assert result.code == 2, result.output
    assert "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()
    for name in names:
        assert name in line, line


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("up", "--workers", "3"), ("--workers", "add --multikueue")),
        (("up", "--multikueue", "--workers", "9"), ("--workers 9", "1 to 4")),
        (("up", "--pods-ready-timeout", "60"), ("--pods-ready-timeout", "add --kueue or --multikueue")),
        (("up", "--multikueue", "--pods-ready-timeout", "-1"), ("--pods-ready-timeout: -1", "0 for off")),
        (("up", "--multikueue-worker-qps", "500"), ("--multikueue-worker-qps", "add --multikueue")),
        (
            ("up", "--kueue-feature-gate", "WorkloadRequestUseMergePatch=true"),
            ("--kueue-feature-gate", "add --kueue or --multikueue"),
        ),
        (
            ("up", "--kueue", "--kueue-feature-gate", "WorkloadRequestUseMergePatch"),
            ("--kueue-feature-gate 'WorkloadRequestUseMergePatch'", "NAME=true or NAME=false"),
        ),
        (
            ("up", "--kueue", "--kueue-feature-gate", "lower=true"),
            ("--kueue-feature-gate 'lower=true'", "NAME=true"),
        ),
        (
            ("up", "--kueue", "--kueue-feature-gate", "A1=yes"),
            ("--kueue-feature-gate 'A1=yes'", "NAME=false"),
        ),
        (
            ("up", "--kueue", "--kueue-feature-gate", "Ab=true", "--kueue-feature-gate", "Ab=false"),
            ("Ab given twice", "each gate once"),
        ),
        (
            ("up", "--multikueue", "--kueue-feature-gate", "VisibilityOnDemand=true"),
            ("--kueue-feature-gate", "needs a Service"),
        ),
        (
            ("up", "--multikueue", "--multikueue-worker-qps", "0"),
            ("--multikueue-worker-qps: 0", "1 to 100000"),
        ),
        (
            ("stockout", "--cluster", "worker-1", "--zone", "us-central1-a", "--all"),
            ("--zone or --all", "both given"),
        ),
        (("stockout", "--cluster", "worker-1"), ("--zone or --all", "neither given")),
        (
            ("up", "--multikueue", "--stockout-zone", "asia-east1-a"),
            ("--stockout-zone asia-east1-a", "us-east4-a"),
        ),
        (("stockout", "--cluster", "manager", "--all"), ("--cluster manager", "name a worker")),
        (
            ("stockout", "--cluster", "worker-7", "--all"),
            ("--cluster 'worker-7'", "manager, worker-1, worker-2"),
        ),
        (("stockout", "--all"), ("--cluster", "manager, worker-1, worker-2")),
        (("kubeconfig", "--cluster", "nope"), ("--cluster 'nope'", "worker-2")),
        (("kubeconfig",), ("--cluster", "holds a MultiKueue set")),
        (("stop", "--cluster", "worker-3"), ("--cluster 'worker-3'", "worker-1")),
        (("start", "--cluster", "boss"), ("--cluster 'boss'", "manager")),
    ],
)
def test_bad_input_for_a_set_answers_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], names: tuple[str, ...]
) -> None:
    root = _a_set(tmp_path / "set")
    _refused(Eops(None)("dev-cluster", *args, "--state-dir", str(root)), *names)


def test_cluster_on_a_directory_without_a_set_says_where_the_set_is(tmp_path: Path) -> None:
    result = Eops(None)("dev-cluster", "stop", "--cluster", "worker-1", "--state-dir", str(tmp_path))
    _refused(result, "--cluster worker-1", "no MultiKueue set", "--state-dir")
    result = Eops(None)(
        "dev-cluster", "stockout", "--cluster", "worker-1", "--all", "--state-dir", str(tmp_path)
    )
    _refused(result, "--cluster worker-1", "leave --cluster out")


@pytest.mark.parametrize("command", ["stockout", "stop", "start", "kubeconfig"])
def test_each_set_command_explains_itself(command: str) -> None:
    result = Eops(None)("dev-cluster", command, "--help")
    assert result.code == 0, result.output
    assert "--cluster" in result.stdout


def test_up_offers_a_multikueue_set() -> None:
    result = Eops(None)("dev-cluster", "up", "--help")
    assert "--multikueue" in result.stdout
    assert "--workers" in result.stdout


def test_stockout_adds_and_takes_away_zones_of_the_clusters_region() -> None:
    from elasticityops.cli.devcluster_set import stockout_zones
    from elasticityops.devcluster.nodes import zones_of

    zones = zones_of("us-east4")
    a, b = zones[0], zones[1]
    assert stockout_zones((a,), [b, a], every=False, off=False, region="us-east4") == (a, b)
    assert stockout_zones((a, b), [a], every=False, off=True, region="us-east4") == (b,)
    assert stockout_zones((a,), [], every=True, off=False, region="us-east4") == zones
    assert stockout_zones(zones, [], every=True, off=True, region="us-east4") == ()
    l4 = f"{a}/nvidia-l4"
    assert stockout_zones((), [l4], every=False, off=False, region="us-east4") == (l4,)
    with pytest.raises(
        ValueError, match="--zone us-central1-a: no such zone in this cluster's region us-east4"
    ):
        stockout_zones((), ["us-central1-a"], every=False, off=False, region="us-east4")


def _embedded_kubeconfig() -> str:
    return yaml.safe_dump(
        {
            "clusters": [
                {
                    "name": "w",
                    "cluster": {"server": "https://127.0.0.1:1", "certificate-authority-data": "Q0E="},
                }
            ],
            "users": [{"name": "w", "user": {"client-certificate-data": "Qw==", "client-key-data": "Sw=="}}],
        }
    )


def test_the_sets_queues_hold_each_workers_quota_and_the_managers_their_sum() -> None:
    from elasticityops.cli.devcluster_set import set_objects

    objects = set_objects(workers=3, max_nodes=10)

    def gpus(manifests: list[dict[str, Any]]) -> dict[str, int]:
        [queue] = [m for m in manifests if m["kind"] == "ClusterQueue"]
        flavors = queue["spec"]["resourceGroups"][0]["flavors"]
        return {f["name"]: f["resources"][0]["nominalQuota"] for f in flavors}

    manager = objects.manager({"worker-1": _embedded_kubeconfig()})
    assert gpus(objects.worker) == {"nvidia-l4": 10, "nvidia-tesla-t4": 10}
    assert gpus(manager) == {"nvidia-l4": 30, "nvidia-tesla-t4": 30}
    for manifests in (objects.worker, manager):
        [local] = [m for m in manifests if m["kind"] == "LocalQueue"]
        assert local["metadata"] == {"name": "eops", "namespace": "default"}


def test_one_cluster_is_not_started_where_a_set_is_recorded(tmp_path: Path) -> None:
    # `down` there would stop the set's clusters and leave this one running.
    root = _a_set(tmp_path / "set")
    result = Eops(None)("dev-cluster", "up", "--no-autoscaling", "--state-dir", str(root))
    assert result.code == 1, result.output
    assert "a MultiKueue set is recorded in" in result.output
    assert not (root / "state.json").exists()
