"""Pure parts of the headroom controller: warm shapes, the budget clamp, the traffic log and the
policy text."""

from __future__ import annotations

import pytest

from elasticityops.domain.budget import GpuBudget, parse_gpu_budget
from elasticityops.domain.headroom.sizing import (
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    WarmHeadroom,
)
from elasticityops.domain.headroom.traffic import ClusterPicture, TrafficLog, TrafficWindows
from elasticityops.domain.headroom.warm_units import WarmShape, clamp_to_budget, gpus_by_type
from elasticityops.headroom.settings import HeadroomSettings, over_budget, parse_headroom

T4 = WarmShape("nvidia-tesla-t4", 1, "3480m", "12000Mi")
T4_BIG = WarmShape("nvidia-tesla-t4", 2, "7000m", "24000Mi")
L4 = WarmShape("nvidia-l4", 1, "7000m", "28000Mi")


def test_shape_keys_are_stable_and_tell_shapes_apart() -> None:
    assert T4.key == WarmShape("nvidia-tesla-t4", 1, "3480m", "12000Mi").key
    assert len({T4.key, T4_BIG.key, L4.key}) == 3
    assert len(T4.key) == 10
    assert int(T4.key, 16) >= 0
    assert "2x nvidia-tesla-t4" in T4_BIG.describe()


@pytest.mark.parametrize(
    ("wanted", "budget", "in_use", "held"),
    [
        pytest.param({T4: 3}, None, {}, {T4: 3}, id="no budget: what is wanted"),
        pytest.param({T4: 3}, "4", {"nvidia-tesla-t4": 2}, {T4: 2}, id="total: real work first"),
        pytest.param({T4: 3}, "4", {"nvidia-tesla-t4": 5}, {T4: 0}, id="over budget already: none"),
        pytest.param(
            {T4: 3, L4: 3}, "nvidia-tesla-t4=4", {"nvidia-tesla-t4": 3}, {T4: 1, L4: 3}, id="per type"
        ),
        pytest.param({T4: 4, L4: 2}, "4", {}, {T4: 2, L4: 2}, id="shared total: in turn"),
        pytest.param({T4: 4, L4: 2}, "5", {}, {T4: 3, L4: 2}, id="shared total: largest ask first"),
        pytest.param({T4_BIG: 2}, "nvidia-tesla-t4=3", {}, {T4_BIG: 1}, id="units of two GPUs"),
        pytest.param({T4: 0, L4: 2}, "1", {}, {T4: 0, L4: 1}, id="zero asks nothing"),
    ],
)
def test_clamp_keeps_in_use_plus_headroom_within_the_budget(
    wanted: dict[WarmShape, int], budget: str | None, in_use: dict[str, int], held: dict[WarmShape, int]
) -> None:
    parsed = parse_gpu_budget(budget) if budget else None
    got = clamp_to_budget(wanted, parsed, in_use)
    assert got == held
    if parsed is not None and parsed.total is not None:
        assert sum(in_use.values()) + sum(gpus_by_type(got).values()) <= max(
            parsed.total, sum(in_use.values())
        )
    for kind, cap in parsed.per_type if parsed else ():
        assert in_use.get(kind, 0) + gpus_by_type(got).get(kind, 0) <= max(cap, in_use.get(kind, 0))


@pytest.mark.timeout(10)  # a hang guard: the turns were one a unit, 10^20 of them
@pytest.mark.parametrize(
    ("budget", "held"),
    [
        pytest.param(None, {T4: 10**20, L4: 10**20}, id="no budget"),
        pytest.param("nvidia-l4=3", {T4: 10**20, L4: 3}, id="a cap on one type only"),
        pytest.param("7", {T4: 3, L4: 4}, id="a total: split in turn, ties by shape"),
    ],
)
def test_an_absurd_ask_is_clamped_in_turns_bounded_by_the_budget_not_the_ask(
    budget: str | None, held: dict[WarmShape, int]
) -> None:
    wanted = {T4: 10**20, L4: 10**20}
    assert clamp_to_budget(wanted, parse_gpu_budget(budget) if budget else None, {}) == held


def _log() -> TrafficLog:
    return TrafficLog(
        TrafficWindows(rate_s=60, slow_s=600, trend_s=600, feedback_s=3600, run_time_min_ended=5),
        10.0,
        started_at=0.0,
    )


def test_traffic_log_measures_rates_busy_runs_and_late_share() -> None:
    log = _log()
    # 30 arrivals, one every 10 s from t=0; each starts 5 s after arriving, except every third
    # (20 s: late); the first 20 have ended, each after 40 s.
    starts = {}
    for i in range(30):
        t = 10.0 * i
        log.admitted(f"i{i}", t)
        starts[i] = t + (20.0 if i % 3 == 0 else 5.0)
        log.started(f"i{i}", t, starts[i])
    for i in range(20):
        log.ended(f"i{i}", starts[i] + 40.0)
    obs = log.observe(300.0, 3600.0, ClusterPicture(free_nodes=2, lead_time_s=90.0))
    assert obs.arrival_rate_per_s == pytest.approx(6 / 60)  # arrivals at 240..290 (and 300-60)
    assert obs.arrival_rate_slow_per_s == pytest.approx(30 / 300)  # younger than the slow window
    assert obs.busy_nodes == 10
    assert obs.pending_requests == 0
    # the 10 still running count by their time so far (domain/headroom/run_times.py)
    so_far = sum(300.0 - starts[i] for i in range(20, 30))
    assert obs.run_time_mean_s == pytest.approx((20 * 40.0 + so_far) / 20)
    # and over the shorter windows too (RUN_TIME_SHARES), which the last 300 s fill alike
    assert [(w, n) for w, _, n in obs.run_time_means] == [
        (900.0, 20),
        (1800.0, 20),
        (3600.0, 20),
        (7200.0, 20),
    ]
    assert obs.run_time_mean_s is not None
    assert {round(m, 9) for _, m, _ in obs.run_time_means} == {round(obs.run_time_mean_s, 9)}
    late = log.observe(1300.0, 3600.0, ClusterPicture(free_nodes=2, lead_time_s=90.0))
    assert [w for w, _, _ in late.run_time_means] == [1800.0, 3600.0, 7200.0]  # 900 s: none started
    assert obs.late_share == pytest.approx(10 / 30)
    assert obs.free_nodes == 2
    assert obs.lead_time_s == 90.0
    assert obs.time_of_day_s == 3600.0


def test_waiting_requests_count_late_once_past_the_target() -> None:
    log = _log()
    log.admitted("a", 0.0)
    assert log.observe(5.0, 0, ClusterPicture()).late_share == 0.0
    assert log.observe(11.0, 0, ClusterPicture()).late_share == 1.0
    assert log.observe(11.0, 0, ClusterPicture()).pending_requests == 1


def test_repeated_reports_count_once_and_ends_without_start_free_nothing() -> None:
    log = _log()
    log.admitted("a", 0.0)
    log.admitted("a", 0.0)
    log.started("a", 0.0, 1.0)
    log.started("a", 0.0, 1.0)
    log.ended("b", None)  # never seen: nothing changes
    obs = log.observe(10.0, 0, ClusterPicture())
    assert obs.busy_nodes == 1
    assert obs.arrival_rate_per_s == pytest.approx(1 / 60)
    log.ended("a", 10.0)
    assert log.observe(20.0, 0, ClusterPicture()).busy_nodes == 0


def test_busy_mean_and_old_arrivals_fall_out_of_their_windows() -> None:
    log = _log()
    for i in range(5):
        log.admitted(f"i{i}", 0.0)
        log.started(f"i{i}", 0.0, 0.0)
    for t in (100.0, 200.0):
        log.observe(t, 0, ClusterPicture())
    for i in range(5):
        log.ended(f"i{i}", 250.0)  # at 250 s
    obs = log.observe(300.0, 0, ClusterPicture())
    assert obs.busy_mean_slow == pytest.approx((5 + 5 + 0) / 3)
    late = log.observe(5000.0, 0, ClusterPicture())
    assert late.arrival_rate_slow_per_s == 0.0
    assert late.late_share is None  # nothing arrived within the feedback window


@pytest.mark.parametrize(
    ("text", "kind"),
    [("none", NoHeadroom), ("warm:3", WarmHeadroom), ("scheduled:08:00=5,20:00=1", ScheduledHeadroom)],
)
def test_policy_text_uses_the_planners_syntax(text: str, kind: type) -> None:
    assert isinstance(parse_headroom(text, target_wait_s=10, lead_time_s=None), kind)


def test_predictive_takes_the_lead_time_given_or_the_planners_default() -> None:
    given = parse_headroom("predictive:5", target_wait_s=10, lead_time_s=120)
    assert isinstance(given, PredictiveHeadroom)
    assert (given.target_wait_s, given.lead_time_s) == (5, 120)
    default = parse_headroom("predictive", target_wait_s=8, lead_time_s=None)
    assert isinstance(default, PredictiveHeadroom)
    assert default.target_wait_s == 8
    assert default.lead_time_s == pytest.approx(460, abs=1)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("bogus", "cannot parse 'bogus'"),
        ("warm:x", "needs a whole number"),
        ("static", "not a policy of the headroom controller"),
        ("predictive-rate", "not a policy of the headroom controller"),
        ("scheduled:25:00=1", "cannot parse schedule"),
    ],
)
def test_bad_policy_text_says_what_to_write(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as caught:
        parse_headroom(text, target_wait_s=10, lead_time_s=None)
    assert "warm:K" in str(caught.value)


@pytest.mark.parametrize(
    ("policy", "budget", "refused"),
    [
        ("warm:9", "4", True),
        ("warm:4", "4", False),
        ("warm:5", "nvidia-tesla-t4=8,nvidia-l4=4", True),
        ("scheduled:08:00=2,20:00=9", "8", True),
        ("predictive", "1", False),  # sized from traffic, bounded as it runs
        ("warm:9", None, False),
    ],
)
def test_a_fixed_headroom_larger_than_a_cap_is_refused(
    policy: str, budget: str | None, refused: bool
) -> None:
    parsed: GpuBudget | None = parse_gpu_budget(budget) if budget else None
    said = over_budget(HeadroomSettings(headroom=policy).policy(), parsed)
    assert (said is not None) == refused
    if said:
        assert "--gpu-budget" in said


def test_a_requeued_invocation_frees_its_gpu_and_is_no_new_arrival() -> None:
    log = _log()
    log.admitted("a", 0.0)
    log.started("a", 0.0, 1.0)
    log.requeued("a")
    obs = log.observe(5.0, 0, ClusterPicture())
    assert (obs.busy_nodes, obs.pending_requests) == (0, 0)
    log.admitted("a", 0.0)
    log.started("a", 0.0, 30.0)  # its second start is late, but it was counted once already
    obs = log.observe(40.0, 0, ClusterPicture())
    assert obs.busy_nodes == 1
    assert obs.arrival_rate_per_s == pytest.approx(1 / 60)
    assert obs.late_share == 0.0
