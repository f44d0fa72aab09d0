"""`eops render gke`: sizing numbers for given inputs, refusals that name the field and the fix,
and YAML that round-trips."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest
import yaml

from elasticityops.domain.errors import InvalidInput
from elasticityops.ops.gke.inputs import GkeInputs, expand_zones
from elasticityops.ops.gke.objects import COMPUTE_CLASS_NAME
from elasticityops.ops.gke.render import render_gke
from elasticityops.ops.gke.sizing import gpu_limit_for_peak, pool_zones_needed

from .manifests import load_documents

BASE = GkeInputs(
    project="my-proj-1",
    region="us-central1",
    zones=("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"),
    peak=4000,
    baseline=60,
)


@pytest.mark.parametrize(
    ("peak", "margin", "limit"),
    [
        pytest.param(4000, 10, 4500, id="seed-4000-to-4500"),
        pytest.param(3000, 10, 3500, id="3000"),
        pytest.param(60, 10, 70, id="small-60"),
        pytest.param(180, 10, 200, id="180"),
        pytest.param(1, 10, 5, id="one"),
        pytest.param(4000, 0, 4000, id="no-margin-exact"),
        pytest.param(4001, 0, 4500, id="no-margin-rounds-up"),
        pytest.param(100, 10, 150, id="100-step-50"),
        pytest.param(10000, 10, 15000, id="5-digit-step-5000"),
    ],
)
def test_gpu_limit_is_peak_plus_margin_rounded_up(peak: int, margin: int, limit: int) -> None:
    assert gpu_limit_for_peak(peak, margin) == limit
    assert limit >= peak * (100 + margin) / 100


@pytest.mark.parametrize(("peak", "needed"), [(1, 1), (1000, 1), (1001, 2), (4000, 4), (4001, 5)])
def test_pool_zones_needed(peak: int, needed: int) -> None:
    assert pool_zones_needed(peak) == needed


@pytest.mark.parametrize(
    ("inputs", "gpu_limit", "per_zone", "total", "cpu", "pod_prefix", "subnet_prefix"),
    [
        pytest.param(BASE, 4500, 15, 60, 4504 * 4, 13, 19, id="4000-peak-4-zones"),
        pytest.param(replace(BASE, zones=BASE.zones[:3]), 4500, 20, 60, 4503 * 4, 13, 19, id="3-zones"),
        pytest.param(
            replace(BASE, peak=200, baseline=64, zones=BASE.zones[:3]),
            250,
            22,
            66,
            253 * 4,
            18,
            23,
            id="uneven-baseline",
        ),
        pytest.param(
            replace(BASE, peak=100, baseline=0),
            150,
            0,
            0,
            154 * 4,
            18,
            24,
            id="no-baseline-small-peak-step-50",
        ),
    ],
)
def test_sizing_numbers(
    inputs: GkeInputs,
    gpu_limit: int,
    per_zone: int,
    total: int,
    cpu: int,
    pod_prefix: int,
    subnet_prefix: int,
) -> None:
    sizing = render_gke(inputs).sizing
    assert sizing.gpu_limit == gpu_limit
    assert (sizing.baseline_per_zone, sizing.baseline_total) == (per_zone, total)
    assert sizing.nap_cpu_limit == cpu
    assert sizing.max_nodes == gpu_limit + len(inputs.zones)
    # The ranges must hold every node: /26 per node (32 pods), 4 reserved subnet addresses.
    assert 2 ** (26 - sizing.pod_range_prefix) >= sizing.max_nodes
    assert 2 ** (32 - sizing.node_subnet_prefix) >= sizing.max_nodes + 4
    assert (sizing.pod_range_prefix, sizing.node_subnet_prefix) == (pod_prefix, subnet_prefix)


def test_quota_covers_the_limit_for_every_gpu_model_and_market() -> None:
    on_demand = render_gke(BASE).sizing.quota
    assert on_demand == {"NVIDIA_T4_GPUS": 4500, "NVIDIA_L4_GPUS": 4500, "CPUS": 4500 * 4 + 4 * 4}
    spot = render_gke(replace(BASE, spot=True, fallback_gpu_type=None)).sizing.quota
    assert spot["PREEMPTIBLE_NVIDIA_T4_GPUS"] == 4500
    assert spot["NVIDIA_T4_GPUS"] == 4500, "spot falls back to on-demand, which needs quota too"
    script = render_gke(BASE).script
    assert "need_quota NVIDIA_T4_GPUS 4500" in script
    assert 'gcloud compute regions describe "$REGION"' in script


def test_pool_zone_warning_only_when_zones_are_short() -> None:
    assert not any("pool-zones" in w for w in render_gke(BASE).warnings)
    short = render_gke(replace(BASE, zones=BASE.zones[:3]))
    assert any("need 4 pool-zones" in w for w in short.warnings)
    assert "need 4 pool-zones" in short.script


def test_script_is_valid_bash_with_strict_mode_and_no_per_request_pools() -> None:
    rendered = render_gke(replace(BASE, preload_disk_image="eops-images-v1", spot=True))
    script = rendered.script
    assert "set -euo pipefail" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    # Exactly one node pool is created by hand: the baseline; every other pool comes from NAP.
    assert script.count("gcloud container node-pools create") == 1
    assert "--enable-autoprovisioning" in script
    assert "--enable-image-streaming" in script
    assert "--autoscaling-profile optimize-utilization" in script
    assert "gpu-driver-version=latest" in script
    assert "mode=CONTAINER_IMAGE_CACHE" in script
    # Every gcloud command in the script is preceded by a comment saying why.
    lines = script.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("gcloud "):
            above = lines[index - 1]
            assert above.startswith("#"), f"uncommented gcloud command: {line}"


def test_no_baseline_means_no_node_pool_command() -> None:
    assert "node-pools create" not in render_gke(replace(BASE, baseline=0)).script


def test_manifests_round_trip_through_yaml() -> None:
    rendered = render_gke(replace(BASE, spot=True))
    for name, text in rendered.files.items():
        if name.endswith(".yaml"):
            assert load_documents(text), name
    assert (
        load_documents(rendered.files["priorityclasses.yaml"])
        + load_documents(rendered.files["computeclass.yaml"])
        == rendered.manifests
    )
    assert load_documents(rendered.files["nap-config.yaml"]) == [rendered.nap_config]
    assert yaml.safe_load(yaml.safe_dump(rendered.nap_config)) == rendered.nap_config


def test_priority_classes_and_placeholder() -> None:
    classes = {m["metadata"]["name"]: m for m in render_gke(BASE).manifests if m["kind"] == "PriorityClass"}
    assert set(classes) == {"eops-high", "eops-normal", "eops-low", "eops-placeholder"}
    assert classes["eops-placeholder"]["value"] == -10
    assert classes["eops-placeholder"]["preemptionPolicy"] == "Never"
    # Real jobs share one value: a running job is never preempted by another real job.
    values = {classes[name]["value"] for name in ("eops-high", "eops-normal", "eops-low")}
    assert len(values) == 1
    assert values.pop() > 0
    assert not any(m["globalDefault"] for m in classes.values())


@pytest.mark.parametrize(
    ("spot", "fallback", "expected"),
    [
        pytest.param(
            True,
            "nvidia-l4",
            [
                ("nvidia-tesla-t4", True),
                ("nvidia-tesla-t4", False),
                ("nvidia-l4", True),
                ("nvidia-l4", False),
            ],
            id="spot-then-on-demand-t4-then-l4",
        ),
        pytest.param(
            False, "nvidia-l4", [("nvidia-tesla-t4", False), ("nvidia-l4", False)], id="on-demand-t4-then-l4"
        ),
        pytest.param(False, None, [("nvidia-tesla-t4", False)], id="no-fallback"),
    ],
)
def test_compute_class_fallback_order(
    spot: bool, fallback: str | None, expected: list[tuple[str, bool]]
) -> None:
    klass = next(
        m
        for m in render_gke(replace(BASE, spot=spot, fallback_gpu_type=fallback)).manifests
        if m["kind"] == "ComputeClass"
    )
    assert klass["metadata"]["name"] == COMPUTE_CLASS_NAME
    rules = klass["spec"]["priorities"]
    assert [(r["gpu"]["type"], r["spot"]) for r in rules] == expected
    for rule in rules:
        assert rule["location"]["zones"] == list(BASE.zones)
        assert rule["gpu"]["driverVersion"] == "latest"
        assert rule["machineType"] == (
            "n1-standard-4" if rule["gpu"]["type"] == "nvidia-tesla-t4" else "g2-standard-4"
        )


@pytest.mark.parametrize(
    ("change", "field", "fix_part"),
    [
        pytest.param(
            {"machine_type": "n1-standard-1"}, "machine-type", "n1-standard-4", id="n1-standard-1-refused"
        ),
        pytest.param({"machine_type": "g2-standard-4"}, "machine-type", "n1-standard-4", id="t4-needs-n1"),
        pytest.param({"peak": 0}, "peak", "--peak", id="zero-peak"),
        pytest.param({"baseline": 5000}, "baseline", "raise --peak", id="baseline-above-peak"),
        pytest.param({"zones": ("europe-west4-a",)}, "zones", "us-central1-a", id="zone-of-other-region"),
        pytest.param({"zones": ()}, "zones", "a,b,c", id="no-zones"),
        pytest.param({"project": "X"}, "project", "lower-case", id="bad-project"),
        pytest.param({"gpu_type": "nvidia-h100-80gb"}, "gpu-type", "nvidia-tesla-t4", id="unsupported-gpu"),
        pytest.param(
            {"fallback_gpu_type": "nvidia-tesla-t4"},
            "fallback-gpu-type",
            "nvidia-l4",
            id="fallback-same-as-primary",
        ),
        pytest.param(
            {"preload_disk_image": "Bad Image"},
            "preload-disk-image",
            "gke-disk-image-builder",
            id="bad-image",
        ),
    ],
)
def test_invalid_inputs_name_the_field_and_the_fix(
    change: dict[str, object], field: str, fix_part: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        render_gke(replace(BASE, **change))  # type: ignore[arg-type]
    problems = {p.field: p for p in caught.value.problems}
    assert field in problems
    assert fix_part in problems[field].fix


def test_n1_standard_1_refusal_explains_why() -> None:
    with pytest.raises(InvalidInput) as caught:
        render_gke(replace(BASE, machine_type="n1-standard-1"))
    assert "1 vCPU" in caught.value.problems[0].problem


def test_expand_zones_accepts_letters() -> None:
    assert expand_zones("us-central1", ["a", " b", "us-central1-c", ""]) == (
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
    )
