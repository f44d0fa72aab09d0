"""The pure parts of a MultiKueue set (devcluster/multikueue.py, cluster_set.py): names, the set's
record, and Kueue's configuration as a manager (the objects: tests/ops/test_render_kueue_multikueue.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elasticityops.devcluster import components, kueue_setup, multikueue, paths
from elasticityops.devcluster.build import _patched_kueue, download_module
from elasticityops.devcluster.cluster_set import manager_config
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.install import object_path
from elasticityops.devcluster.kueue_setup import KueuePorts, MultiKueueManager
from elasticityops.devcluster.multikueue import SetRecord, read_record
from elasticityops.devcluster.versions import KUEUE_MODULE_PATH, KUEUE_VERSION
from elasticityops.ops.kueue_multikueue import multikueue_cluster, multikueue_config


def test_a_set_is_a_manager_and_numbered_workers() -> None:
    record = SetRecord(workers=3, started_at=0.0)
    assert record.names == ("manager", "worker-1", "worker-2", "worker-3")
    assert record.worker_names == ("worker-1", "worker-2", "worker-3")


@pytest.mark.parametrize("count", [0, -1, multikueue.MAX_WORKERS + 1])
def test_a_set_has_one_to_max_workers(count: int) -> None:
    with pytest.raises(ValueError, match=r"--workers .*: a set has 1 to"):
        multikueue.check_workers(count)


def test_an_unknown_cluster_name_names_those_the_set_has() -> None:
    record = SetRecord(workers=2, started_at=0.0)
    with pytest.raises(ValueError, match=r"--cluster 'worker-3'.*manager, worker-1, worker-2"):
        record.check_name("worker-3")
    with pytest.raises(ValueError, match="--cluster manager: the manager has no nodes"):
        record.check_worker("manager")
    assert record.check_worker("worker-2") == "worker-2"


def test_the_record_reads_back_what_was_written(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None, "a directory of one cluster, or none, holds no set"
    SetRecord(workers=2, started_at=12.5, up_seconds=80.0).write(tmp_path)
    assert read_record(tmp_path) == SetRecord(workers=2, started_at=12.5, up_seconds=80.0)


def test_kueue_as_a_manager_gets_the_multikueue_section() -> None:
    ports = KueuePorts(webhook=1, health=2, metrics=3)
    assert "multiKueue" not in kueue_setup.manager_config(ports, "/certs")
    timings = MultiKueueManager(origin="o", worker_lost_timeout_s=60, gc_interval_s=30)
    config = kueue_setup.manager_config(ports, "/certs", timings)
    assert config["multiKueue"] == {
        "origin": "o",
        "workerLostTimeout": "60s",
        "gcInterval": "30s",
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    }
    incremental = MultiKueueManager(dispatcher="kueue.x-k8s.io/multikueue-dispatcher-incremental")
    config = kueue_setup.manager_config(ports, "/certs", incremental)
    assert config["multiKueue"]["dispatcherName"] == "kueue.x-k8s.io/multikueue-dispatcher-incremental"


def test_kueue_waits_for_pods_ready_where_asked_and_lets_other_work_in_meanwhile() -> None:
    ports = KueuePorts(webhook=1, health=2, metrics=3)
    assert "waitForPodsReady" not in kueue_setup.manager_config(ports, "/certs")
    config = kueue_setup.manager_config(ports, "/certs", pods_ready_timeout_s=45)
    assert config["waitForPodsReady"] == {
        "timeout": "45s",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 45},
    }


def test_the_manager_cluster_has_no_nodes_and_runs_kueue_as_a_manager(tmp_path: Path) -> None:
    settings = AutoscalerSettings(baseline=2, stockout_zones=("us-east4-a",))  # worker-2's zone
    worker = ClusterConfig(state_dir=tmp_path, autoscaler=settings, api_qps=123, pods_ready_timeout_s=45)
    cfg = manager_config(worker, tmp_path, MultiKueueManager())
    assert cfg.pods_ready_timeout_s is None, "no pods on the manager: the workers' Kueue waits for them"
    assert cfg.autoscaler.validated().stockout_zones == (), "the workers' stockouts are theirs"
    assert cfg.state_dir == tmp_path / "manager"
    assert (cfg.nodes, cfg.kueue, cfg.multikueue) == (False, True, MultiKueueManager())
    assert not cfg.autoscaler.enabled
    assert cfg.autoscaler.baseline == 0
    assert cfg.api_qps == 123, "the control plane's own flags are the workers'"


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        (
            {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s", "namespace": "ns"}},
            "/api/v1/namespaces/ns/secrets",
        ),
        (multikueue_cluster("worker-1"), "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters"),
        (multikueue_config(("worker-1",)), "/apis/kueue.x-k8s.io/v1beta2/multikueueconfigs"),
        (
            {
                "kind": "LocalQueue",
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "metadata": {"name": "q", "namespace": "d"},
            },
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/d/localqueues",
        ),
    ],
)
def test_each_object_is_created_in_its_collection(manifest: dict[str, object], path: str) -> None:
    assert object_path(manifest) == path


def test_an_object_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="Deployment"):
        object_path({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d"}})


def test_each_worker_is_a_region_of_its_own_with_the_stockouts_there() -> None:
    settings = AutoscalerSettings(max_nodes=7, stockout_zones=("us-east4-b", "us-central1-a/nvidia-l4"))
    workers = multikueue.worker_settings(settings, 2)
    assert {w: s.region for w, s in workers.items()} == {"worker-1": "us-central1", "worker-2": "us-east4"}
    assert workers["worker-1"].stockout_zones == ("us-central1-a/nvidia-l4",)
    assert workers["worker-2"].stockout_zones == ("us-east4-b",)
    assert {s.max_nodes for s in workers.values()} == {7}, "the other cloud flags apply to each worker"


def test_a_stockout_zone_no_worker_has_is_refused_naming_theirs() -> None:
    settings = AutoscalerSettings(stockout_zones=("europe-west4-a",))
    with pytest.raises(ValueError, match=r"--stockout-zone europe-west4-a: no worker .*worker-2: us-east4-a"):
        multikueue.worker_settings(settings, 2)
    assert multikueue.worker_settings(settings, 3)["worker-3"].stockout_zones == ("europe-west4-a",)


def test_a_workers_node_groups_and_static_pool_are_in_its_region() -> None:
    from elasticityops.devcluster.kwok_provider import group_names, templates
    from elasticityops.devcluster.nodes import baseline_nodes, zones_of

    zones = zones_of("europe-west4")
    assert group_names("europe-west4") == (*(f"nap-t4-{z}" for z in zones), f"nap-l4-{zones[0]}")
    labels = [n["metadata"]["labels"] for n in templates(5, region="europe-west4")]
    labels += [n["metadata"]["labels"] for n in baseline_nodes(4, region="europe-west4")]
    assert {x["topology.kubernetes.io/region"] for x in labels} == {"europe-west4"}
    assert {x["topology.kubernetes.io/zone"] for x in labels} == set(zones)
    with pytest.raises(ValueError, match="region 'mars-1'"):
        zones_of("mars-1")


def test_a_cluster_knows_its_region_after_a_restart_of_its_cloud(tmp_path: Path) -> None:
    # The simulated cloud reads its knobs from autoscaler.json: the region goes with them.
    path = tmp_path / "autoscaler.json"
    AutoscalerSettings(region="us-west1", stockout_zones=("us-west1-b",)).write(path)
    assert AutoscalerSettings.read(path).region == "us-west1"
    with pytest.raises(ValueError, match="unknown zone 'us-central1-a'; zones are us-west1-a, us-west1-b"):
        AutoscalerSettings(region="us-west1", stockout_zones=("us-central1-a",)).validated()


MULTIKUEUE_CLUSTER_GO = "pkg/controller/admissionchecks/multikueue/multikueuecluster.go"


def test_the_managers_clients_to_its_workers_get_the_patched_rate_only_when_asked() -> None:
    """Kueue v0.17.0 paces them at client-go's 5 QPS, set nowhere (kueue#14973); the dev
    cluster's build patch reads the rate from the manager's environment."""
    assert MultiKueueManager().env() == {}
    assert components.kueue_env(None) is None, "a cluster that is no manager: the CLI's own"
    assert components.kueue_env(MultiKueueManager()) is None, "upstream's rate: nothing set"
    rated = components.kueue_env(MultiKueueManager(worker_qps=500))
    assert rated is not None
    assert rated[kueue_setup.WORKER_QPS_ENV] == "500"
    assert rated["PATH"] == os.environ["PATH"], "the rest of the environment is kept"
    assert "multiKueue" in kueue_setup.manager_config(
        KueuePorts(1, 2, 3), "/certs", MultiKueueManager(worker_qps=500)
    ), "the rate is not in Kueue's Configuration: v0.17.0 would refuse an unknown field"


def test_the_kueue_build_patch_applies_to_the_pinned_module_and_is_part_of_the_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patch applies to exactly the module the build downloads (git apply takes no fuzz),
    reads the variable the manager is given, and a change to it builds Kueue again."""
    module = Path(download_module(KUEUE_MODULE_PATH, KUEUE_VERSION, paths.KUEUE_MODULE)["Dir"])
    wrapper = _patched_kueue(module, tmp_path / "src", tmp_path / "build.log")
    patched = (tmp_path / "src" / "kueue" / MULTIKUEUE_CLUSTER_GO).read_text()
    assert f'os.Getenv("{kueue_setup.WORKER_QPS_ENV}")' in patched
    assert f"replace {KUEUE_MODULE_PATH} => {tmp_path / 'src' / 'kueue'}" in (wrapper / "go.mod").read_text()
    assert (module / MULTIKUEUE_CLUSTER_GO).read_text() != patched, "the module cache is left as it was"

    before = paths.kueue_stamp()
    other = tmp_path / "other.patch"
    other.write_text("a different patch\n")
    monkeypatch.setattr(paths, "KUEUE_PATCHES", (other,))
    assert paths.kueue_stamp() != before
