"""Distributions, settings, node manifests, kwok stages and the simulated cloud's stamps (no cluster)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.devcluster import components
from elasticityops.devcluster.cloud import baseline_plan, stamp, stockout
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.node_stages import BOOT_AT, DRIVER_AT, STOCKOUT, node_stages
from elasticityops.devcluster.nodes import baseline_node_name, baseline_nodes, gpu_node, node_ready
from elasticityops.devcluster.paths import Toolchain
from elasticityops.devcluster.stages import (
    SIMULATED_OUTPUT,
    completion_stages,
    render_kwok_config,
    simulated_output_log,
)
from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.errors import PlannerInputError


# The dev cluster's provision_delay is the planner's spec language, parsed by the planner; kind
# and two quantiles pin each distribution (a lognormal's 5th percentile is median^2 / p95).
@pytest.mark.parametrize(
    ("spec", "kind", "p5", "median", "p95"),
    [
        ("fixed:120", "fixed", 120, 120, 120),
        ("fixed:90", "fixed", 90, 90, 90),
        ("uniform:60,180", "uniform", 66, 120, 174),
        ("lognormal:median=240,p95=420", "lognormal", 240 * 240 / 420, 240, 420),
    ],
)
def test_parse_delay(spec: str, kind: str, p5: float, median: float, p95: float) -> None:
    d = parse_distribution(spec)
    assert d.kind == kind
    assert [d.quantile(0.05), d.median, d.quantile(0.95)] == pytest.approx([p5, median, p95])
    assert parse_distribution(str(d)) == d
    assert AutoscalerSettings(provision_delay=spec).validated().provision_delay == spec


@pytest.mark.parametrize(
    "spec",
    # "90" meant fixed:90 to the dev cluster's own parser; the one language refuses a bare number
    ["", "fixed:-1", "uniform:5,1", "lognormal:median=300,p95=200", "gamma:1", "x", "90"],
)
def test_parse_delay_rejects(spec: str) -> None:
    with pytest.raises(PlannerInputError, match="--provision-delay"):
        parse_distribution(spec)
    with pytest.raises(ValueError, match="--provision-delay"):
        AutoscalerSettings(provision_delay=spec).validated()


def test_lognormal_matches_its_median_and_p95() -> None:
    d = parse_distribution("lognormal:median=240,p95=420")
    rng = random.Random(7)
    xs = sorted(d.sample(rng) for _ in range(20_000))
    assert statistics.median(xs) == pytest.approx(240, rel=0.05)
    assert xs[int(0.95 * len(xs))] == pytest.approx(420, rel=0.05)


def test_settings_roundtrip_and_validation(tmp_path: Path) -> None:
    s = AutoscalerSettings(baseline=3, provision_delay="uniform:1,2")
    s.write(tmp_path / "a.json")
    assert AutoscalerSettings.read(tmp_path / "a.json") == s
    with pytest.raises(ValueError, match="unknown"):
        AutoscalerSettings.from_json({"baseline": 1, "bogus": 2})
    zoned = AutoscalerSettings(stockout_zones=("us-central1-a",))
    zoned.write(tmp_path / "b.json")
    assert AutoscalerSettings.read(tmp_path / "b.json") == zoned  # JSON's list comes back a tuple
    with pytest.raises(ValueError, match="stockout_zones: unknown zone 'mars-1'"):
        AutoscalerSettings(stockout_zones=("mars-1",)).validated()
    with pytest.raises(PlannerInputError, match="--driver-delay"):
        AutoscalerSettings(driver_delay="90").validated()


def test_gpu_node_looks_like_gke_t4() -> None:
    n = gpu_node("n1", pool="p", zone="us-central1-b", role="baseline")
    labels = n["metadata"]["labels"]
    assert labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert labels["node.kubernetes.io/instance-type"] == "n1-standard-4"
    assert labels["cloud.google.com/gke-nodepool"] == "p"
    assert labels["topology.kubernetes.io/zone"] == "us-central1-b"
    assert n["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert n["status"]["allocatable"] | {} == {
        "cpu": "4",
        "memory": "15Gi",
        "nvidia.com/gpu": "1",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert len({x["metadata"]["labels"]["topology.kubernetes.io/zone"] for x in baseline_nodes(8)}) == 4


def test_completion_stages_are_exclusive_and_jitter_free() -> None:
    annotated, job_default = completion_stages()
    keys_a = {e["key"]: e["operator"] for e in annotated["spec"]["selector"]["matchExpressions"]}
    keys_b = {e["key"]: e["operator"] for e in job_default["spec"]["selector"]["matchExpressions"]}
    ann = '.metadata.annotations["eops.dev/run-seconds"]'
    assert (keys_a[ann], keys_b[ann]) == ("Exists", "DoesNotExist")
    for st in (annotated, job_default):
        assert not any("jitter" in k.lower() for k in st["spec"]["delay"])


def test_kwok_config_is_valid_multi_document_yaml() -> None:
    # Ours replace the stock pod-ready; the stock node stage is kept, after our node stages.
    stock = (
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: node-initialize\n"
        "spec:\n  resourceRef: {apiGroup: v1, kind: Node}\n---\n"
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\n"
        "spec:\n  resourceRef: {apiGroup: v1, kind: Pod}\n"
    )
    docs = list(
        yaml.safe_load_all(
            render_kwok_config(stock, "127.0.0.1:1234", ("/pki/a.crt", "/pki/a.key"), "/state/pod-output.log")
        )
    )
    assert [d["metadata"]["name"] for d in docs[1:]] == [
        "eops-simulated-output",
        "eops-pod-ready",
        "eops-pod-complete-annotated",
        "eops-pod-complete-job-default",
        "eops-node-boot",
        "eops-node-gpu-driver",
        "eops-node-heartbeat",
        "eops-node-heartbeat-driver-wait",
        "node-initialize",
    ]
    assert docs[0]["kind"] == "KwokConfiguration"
    options = docs[0]["options"]
    assert (options["serverAddress"], options["nodePort"]) == ("127.0.0.1:1234", 1234)
    assert (options["tlsCertFile"], options["tlsPrivateKeyFile"]) == ("/pki/a.crt", "/pki/a.key")
    # No selector: every container of every pod logs the one file.
    assert docs[1]["kind"] == "ClusterLogs"
    assert docs[1]["spec"] == {"logs": [{"logsFile": "/state/pod-output.log"}]}


def test_the_simulated_output_is_in_the_cri_log_format() -> None:
    at = datetime(2026, 12, 4, 1, 2, 3, 450000, tzinfo=UTC)
    lines = simulated_output_log(at).splitlines()
    assert len(lines) == len(SIMULATED_OUTPUT) == 2
    for line, text in zip(lines, SIMULATED_OUTPUT, strict=True):
        assert line == f"2026-12-04T01:02:03.450000Z stdout F {text}"


def _new_node(zone: str = "us-central1-b", created: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    node = gpu_node("nap-t4-us-central1-b-abcde", pool="nap-t4-us-central1-b", zone=zone, role="autoscaled")
    del node["metadata"]["labels"]["kubernetes.io/hostname"]  # as the kwok provider copies its template
    node["metadata"]["creationTimestamp"] = created
    return node


def test_a_new_node_is_stamped_with_boot_and_driver_times_from_its_creation() -> None:
    s = AutoscalerSettings(provision_delay="fixed:90", driver_delay="uniform:10,20")
    patch = stamp(_new_node(), s, random.Random(1), now=0.0)
    assert patch is not None
    meta = patch["metadata"]
    created = epoch("2026-12-01T10:00:00Z")
    boot, driver = epoch(meta["annotations"][BOOT_AT]), epoch(meta["annotations"][DRIVER_AT])
    assert boot is not None
    assert driver is not None
    assert created is not None
    assert boot - created == pytest.approx(90)
    assert 10 <= driver - boot <= 20
    assert meta["labels"] == {"kubernetes.io/hostname": "nap-t4-us-central1-b-abcde"}


def test_delays_are_sampled_per_node() -> None:
    s = AutoscalerSettings(provision_delay="lognormal:median=60,p95=120")
    rng = random.Random(3)
    patches = [stamp(_new_node(), s, rng, now=0.0) for _ in range(20)]
    boots = {patch["metadata"]["annotations"][BOOT_AT] for patch in patches if patch is not None}
    assert len(boots) == 20


def test_a_new_node_in_a_stocked_out_zone_is_not_stamped_but_failed() -> None:
    s = AutoscalerSettings(stockout_zones=("us-central1-b",))
    failed = stockout(_new_node(), s)
    assert failed is not None
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in failed["metadata"]["annotations"][STOCKOUT]
    assert stamp(_new_node(), s, random.Random(1), now=0.0) is None
    assert stockout(_new_node(zone="us-central1-c"), s) is None
    assert stamp(_new_node(zone="us-central1-c"), s, random.Random(1), now=0.0) is not None
    # A node stamped before its zone ran out keeps running; a failed one is failed once.
    booted = _new_node()
    booted["metadata"]["annotations"][BOOT_AT] = "2026-12-01T10:01:00Z"
    assert stockout(booted, s) is None
    again = _new_node()
    again["metadata"]["annotations"].update(failed["metadata"]["annotations"])
    assert stockout(again, s) is None
    assert stamp(again, AutoscalerSettings(), random.Random(1), now=0.0) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda n: n["metadata"]["annotations"].update({BOOT_AT: "2026-12-01T10:01:00Z"}),
        lambda n: n["metadata"].update({"deletionTimestamp": "2026-12-01T10:00:05Z"}),
        lambda n: n["metadata"]["labels"].update({"eops.dev/role": "baseline"}),
    ],
    ids=["stamped", "deleting", "not-autoscaled"],
)
def test_a_node_is_stamped_once_and_only_if_autoscaled(change: Callable[[dict[str, Any]], None]) -> None:
    node = _new_node()
    change(node)
    assert stamp(node, AutoscalerSettings(), random.Random(1), now=0.0) is None


def test_baseline_plan_adds_and_removes_by_number() -> None:
    names = {baseline_node_name(i) for i in range(3)}
    assert baseline_plan(names, 3) == ([], [])
    assert baseline_plan(names, 5) == ([baseline_node_name(3), baseline_node_name(4)], [])
    assert baseline_plan(names, 1) == ([], [baseline_node_name(2), baseline_node_name(1)])


def _by_name(stages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {st["metadata"]["name"]: st for st in stages}


def _exprs(stage: dict[str, Any]) -> list[dict[str, Any]]:
    exprs: list[dict[str, Any]] = stage["spec"]["selector"]["matchExpressions"]
    return exprs


def test_node_stages_keep_the_stock_initialize_off_autoscaled_nodes() -> None:
    stock: list[dict[str, Any]] = [
        {"metadata": {"name": "node-initialize"}, "spec": {"selector": {"matchExpressions": []}}}
    ]
    stages = _by_name(node_stages(stock))
    assert list(stages) == [
        "eops-node-boot",
        "eops-node-gpu-driver",
        "eops-node-heartbeat",
        "eops-node-heartbeat-driver-wait",
        "node-initialize",
    ]
    assert _exprs(stages["node-initialize"]) == [
        {"key": '.metadata.labels["eops.dev/role"]', "operator": "NotIn", "values": ["autoscaled"]}
    ]
    assert stock[0]["spec"]["selector"]["matchExpressions"] == []  # the input is not changed
    boot, driver = stages["eops-node-boot"], stages["eops-node-gpu-driver"]
    for st, at in ((boot, BOOT_AT), (driver, DRIVER_AT)):
        keys = {e["key"]: e["operator"] for e in _exprs(st)}
        assert keys[f'.metadata.annotations["{at}"]'] == "Exists"
        assert st["spec"]["delay"]["durationFrom"]["expressionFrom"] == f'.metadata.annotations["{at}"]'
    driver_keys = {e["key"]: e.get("values") for e in _exprs(driver)}
    assert driver_keys['.status.allocatable["nvidia.com/gpu"]'] == ["0"]


def test_the_stock_heartbeat_is_replaced_and_no_stock_node_stage_races_the_driver_stage() -> None:
    """kwok plays one of the matching stages at random: a stock node stage that also matches a
    Ready node whose GPU is still 0 would make the driver stage wait for that stage's delay. The
    stock heartbeat needs kwok's leases, which the dev cluster turns off: ours replaces it."""
    ready = {
        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
        "operator": "In",
        "values": ["True"],
    }
    heartbeat = {
        "metadata": {"name": "node-heartbeat-with-lease"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchExpressions": [ready]},
        },
    }
    other: dict[str, Any] = {
        "metadata": {"name": "node-other"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchExpressions": [ready]},
        },
    }
    pod_stage = {"metadata": {"name": "pod-ready"}, "spec": {"resourceRef": {"kind": "Pod"}, "selector": {}}}
    stages = _by_name(node_stages([heartbeat, other, pod_stage]))
    assert "node-heartbeat-with-lease" not in stages
    not_waiting = {"key": '.status.allocatable["nvidia.com/gpu"]', "operator": "NotIn", "values": ["0"]}
    assert not_waiting in _exprs(stages["node-other"])
    assert len(other["spec"]["selector"]["matchExpressions"]) == 1  # the input is not changed
    assert stages["pod-ready"] == pod_stage


def test_heartbeats_beat_every_node_and_the_driver_wait_is_split_by_time() -> None:
    """Exactly one stage matches a Ready node waiting for its driver: the waiting heartbeat while
    the driver is more than one heartbeat away, the driver stage within one (the same jq test,
    true for one and false for the other)."""
    stages = _by_name(node_stages([], heartbeat_seconds=45))
    beat, wait = stages["eops-node-heartbeat"], stages["eops-node-heartbeat-driver-wait"]
    driver = stages["eops-node-gpu-driver"]
    not_waiting = {"key": '.status.allocatable["nvidia.com/gpu"]', "operator": "NotIn", "values": ["0"]}
    assert not_waiting in _exprs(beat)
    far = [e for e in _exprs(wait) if "now" in e["key"]]
    near = [e for e in _exprs(driver) if "now" in e["key"]]
    assert len(far) == len(near) == 1
    assert far[0]["key"] == near[0]["key"]
    assert (far[0]["values"], near[0]["values"]) == (["true"], ["false"])
    assert "> 45" in far[0]["key"]
    assert far[0]["key"].startswith("try ")
    for st in (beat, wait):
        assert st["spec"]["delay"] == {"durationMilliseconds": 45000, "jitterDurationMilliseconds": 49500}
        template = st["spec"]["next"]["statusTemplate"]
        assert "lastHeartbeatTime: {{ $now | Quote }}" in template
        # Transition times are kept: a heartbeat never makes a node look Ready for longer.
        assert "lastTransitionTime: {{ .lastTransitionTime | Quote }}" in template


def test_kwok_runs_without_node_leases_by_default(tmp_path: Path) -> None:
    cfg = ClusterConfig(state_dir=tmp_path)
    assert cfg.node_lease_seconds == 0
    argv = components.kwok(Toolchain(tmp_path), components.Layout(tmp_path), cfg)
    assert "--node-lease-duration-seconds=0" in argv
    # Three heartbeats (kwok's jitter included) before a node turns Unknown, at least 60 s.
    assert components.node_monitor_grace(cfg) == max(3 * cfg.node_heartbeat_seconds * 11 // 10, 60)
    assert components.node_monitor_grace(replace(cfg, node_heartbeat_seconds=100)) == 330
    assert components.node_monitor_grace(replace(cfg, node_lease_seconds=240)) == 180


def test_node_ready_reads_the_ready_condition() -> None:
    assert node_ready(gpu_node("n1", pool="p", zone="z", role="baseline", now="2026-01-01T00:00:00Z"))
    assert not node_ready(gpu_node("n1", pool="p", zone="z", role="autoscaled"))  # kwok readies it
    assert not node_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not node_ready({})


def test_benchmark_autoscaler_settings_are_valid_and_keep_nodes() -> None:
    from elasticityops.devcluster.config import AutoscalerSettings

    knobs = AutoscalerSettings.for_benchmarks(0).validated()
    assert knobs.max_nodes == 1
    assert knobs.provision_delay == "fixed:5"
    assert knobs.driver_delay == "fixed:0"
    assert knobs.scale_down_after == 3600.0


def _new_l4_node(zone: str = "us-central1-a") -> dict[str, Any]:
    node = _new_node(zone=zone)
    node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] = "nvidia-l4"
    return node


@pytest.mark.parametrize(
    ("entries", "t4_out", "l4_out"),
    [
        pytest.param(("us-central1-a",), True, True, id="a-whole-zone"),
        pytest.param(("us-central1-a/nvidia-tesla-t4",), True, False, id="only-t4-there"),
        pytest.param(("us-central1-a/nvidia-l4",), False, True, id="only-l4-there"),
        pytest.param(("us-central1-b/nvidia-tesla-t4",), False, False, id="another-zone"),
    ],
)
def test_a_stockout_can_be_of_one_gpu_type_in_a_zone(
    entries: tuple[str, ...], t4_out: bool, l4_out: bool
) -> None:
    s = AutoscalerSettings(stockout_zones=entries).validated()
    t4, l4 = stockout(_new_node(zone="us-central1-a"), s), stockout(_new_l4_node(), s)
    assert (t4 is not None, l4 is not None) == (t4_out, l4_out)
    if entries == ("us-central1-a/nvidia-tesla-t4",):
        assert t4 is not None
        assert (
            "zone us-central1-a does not have enough resources available for nvidia-tesla-t4"
            in (t4["metadata"]["annotations"][STOCKOUT])
        )


def test_a_stockout_of_a_gpu_type_the_dev_cluster_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no node group for; use ZONE or ZONE/TYPE"):
        AutoscalerSettings(stockout_zones=("us-central1-a/nvidia-h100-80gb",)).validated()
    with pytest.raises(ValueError, match="unknown zone 'mars-1'"):
        AutoscalerSettings(stockout_zones=("mars-1/nvidia-l4",)).validated()


def test_the_api_server_runs_upstreams_timeouts_unless_the_test_session_shortens_them(tmp_path: Path) -> None:
    from elasticityops.devcluster.pytest_plugin import FAULTY_SERVER

    def flags(cfg: ClusterConfig) -> set[str]:
        argv = components.kube_apiserver(
            Toolchain(tmp_path), components.Layout(tmp_path), components.Ports(*range(7)), cfg
        )
        return {a for a in argv if a.startswith(("--etcd-compaction", "--request-timeout", "--watch-cache"))}

    assert flags(ClusterConfig(state_dir=tmp_path)) == {
        "--etcd-compaction-interval=300s",
        "--request-timeout=60s",
    }
    assert flags(ClusterConfig(state_dir=tmp_path, **FAULTY_SERVER)) == {
        "--etcd-compaction-interval=10s",
        "--request-timeout=10s",
        "--watch-cache-sizes=jobs.batch#0",
    }
