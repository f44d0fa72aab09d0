"""The dev cluster's knobs as the planner's settings."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.planner.distributions import parse_distribution
from elasticityops.rehearse.cluster_map import add_delays, mean_var, planner_settings


@pytest.mark.parametrize(
    ("first", "second", "spec"),
    [
        ("fixed:60", "fixed:30", "fixed:90"),
        ("lognormal:median=240,p95=420", "fixed:0", "lognormal:median=240,p95=420"),
        ("fixed:0", "exponential:mean=5", "exponential:mean=5"),
        ("uniform:10,20", "fixed:5", "uniform:15,25"),
    ],
    ids=["fixed+fixed", "lognormal+0", "0+exponential", "uniform+fixed"],
)
def test_exact_sums(first: str, second: str, spec: str) -> None:
    total, exact = add_delays(parse_distribution(first), parse_distribution(second))
    want = parse_distribution(spec)
    assert exact
    assert total.kind == want.kind
    assert (total.a, total.b) == pytest.approx((want.a, want.b))


def test_a_sum_that_varies_twice_keeps_mean_and_variance() -> None:
    a, b = parse_distribution("lognormal:median=60,p95=120"), parse_distribution("uniform:30,90")
    total, exact = add_delays(a, b)
    assert not exact
    assert total.kind == "lognormal"
    mean, var = mean_var(total)
    (ma, va), (mb, vb) = mean_var(a), mean_var(b)
    assert mean == pytest.approx(ma + mb)
    assert var == pytest.approx(va + vb)
    assert parse_distribution(total.spec).kind == "lognormal"  # its spec reads back


def test_mean_var_matches_sampling() -> None:
    rng = random.Random(3)
    for spec in ("lognormal:median=240,p95=420", "uniform:80,120", "exponential:mean=200"):
        d = parse_distribution(spec)
        xs = [d.sample(rng) for _ in range(40_000)]
        mean, var = mean_var(d)
        assert statistics.fmean(xs) == pytest.approx(mean, rel=0.03)
        assert statistics.pvariance(xs) == pytest.approx(var, rel=0.08)


def test_every_knob_maps_to_its_planner_twin() -> None:
    knobs = AutoscalerSettings(
        baseline=3,
        max_nodes=250,
        scan_interval=5.0,
        provision_delay="lognormal:median=240,p95=420",
        driver_delay="fixed:0",
        scale_down_after=600.0,
        max_scale_down_parallelism=7,
        backoff_initial=120.0,
        backoff_max=900.0,
        max_node_provision_time=700.0,
        seed=9,
    )
    mapped = planner_settings(knobs)
    s = mapped.settings
    assert len(mapped.notes) == 1  # the queue's order, which every dev cluster has
    assert s.pending_order == "newest-first"
    assert (s.baseline, s.max_nodes, s.scan_interval_s) == (3, 250, 5.0)
    assert str(s.provision_delay) == "lognormal:median=240,p95=420"
    assert (s.scale_down_after_s, s.scale_down_delay_after_add_s) == (600.0, 600.0)
    assert (s.scale_down_parallelism, s.backoff_initial_s, s.backoff_max_s) == (7, 120.0, 900.0)
    assert s.max_provision_time_s == 700.0
    assert (s.node_pools, s.pool_size_limit, s.autoscaled_cap) == (4, 250, 247)
    assert s.min_billed_s == 0.0  # measured idle has no billing minimum either
    assert s.seed == 9


def test_notes_say_what_the_planner_does_not_model() -> None:
    knobs = AutoscalerSettings(
        provision_delay="uniform:5,15", driver_delay="exponential:mean=3", stockout_zones=("us-central1-a",)
    )
    notes = planner_settings(knobs).notes
    assert any("same mean and variance" in n for n in notes)
    assert any("us-central1-a" in n for n in notes)


def test_the_empty_node_pick_follows_the_schedulers_cores() -> None:
    knobs = AutoscalerSettings()
    assert planner_settings(knobs).settings.empty_node_pick == "random"  # cores unknown
    two = planner_settings(knobs, scheduler_cores=2)
    assert two.settings.empty_node_pick == "first-fit"
    assert any("first-fit" in n for n in two.notes)
    many = planner_settings(knobs, scheduler_cores=32)
    assert many.settings.empty_node_pick == "random"
    assert any("32 cores" in n for n in many.notes)


def test_the_cores_a_go_program_gets_here(tmp_path: Path) -> None:
    # Go 1.25+: GOMAXPROCS if set, else the usable CPUs capped by a cgroup v2 limit (rounded up,
    # at least 2)
    from elasticityops.rehearse.prepare import local_cores

    cpu_max = tmp_path / "cpu.max"
    assert local_cores(cpu_max, {"GOMAXPROCS": "3"}) == 3
    usable = local_cores(cpu_max, {})  # no such file: the usable CPUs
    assert usable >= 1
    cpu_max.write_text("max 100000\n")
    assert local_cores(cpu_max, {}) == usable
    cpu_max.write_text("50000 100000\n")  # half a core: Go still takes 2 (or fewer CPUs)
    assert local_cores(cpu_max, {}) == min(usable, 2)
    cpu_max.write_text("1000000 100000\n")  # 10 cores' worth: the CPUs bound it
    assert local_cores(cpu_max, {}) == min(usable, 10)
    cpu_max.write_text("garbage")
    assert local_cores(cpu_max, {"GOMAXPROCS": "x"}) == usable
