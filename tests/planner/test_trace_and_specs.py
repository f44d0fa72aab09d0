"""Trace loading and validation, distribution specs, policy specs, the synthetic generator."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.policies import parse_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.synthetic import SyntheticSpec, concurrency_profile, generate
from elasticityops.planner.trace import Trace, load_trace, write_trace


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_loads_optional_columns_in_any_order(tmp_path: Path) -> None:
    trace, notes = load_trace(
        write(tmp_path, "function,duration_s,arrival_s,priority\nf,10,0,0\ng,5,2.5,1\n")
    )
    assert trace.arrival_s.tolist() == [0.0, 2.5]
    assert trace.duration_s.tolist() == [10.0, 5.0]
    assert trace.function == ("f", "g")
    assert notes.unsorted_rows == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "empty", id="empty-file"),
        pytest.param("arrival_s,duration_s\n", "no rows", id="header-only"),
        pytest.param("arrival,duration_s\n0,1\n", "line 1: missing column(s) arrival_s", id="missing-column"),
        pytest.param(
            "arrival_s,duration_s\n0,1\nx,1\n", "line 3: arrival_s 'x' is not a number", id="non-numeric"
        ),
        pytest.param("arrival_s,duration_s\n0,1\n1,-4\n", "line 3: duration_s '-4' must be", id="negative"),
        pytest.param("arrival_s,duration_s\n0,1\n1,nan\n", "line 3: duration_s 'nan'", id="nan"),
        pytest.param("arrival_s,duration_s\n0,1\n1\n", "line 3: 1 fields", id="short-row"),
    ],
)
def test_bad_traces_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PlannerInputError, match="--trace") as info:
        load_trace(write(tmp_path, text))
    assert message in str(info.value)


def test_a_bom_before_the_header_is_skipped(tmp_path: Path) -> None:
    """Spreadsheets save CSV with a UTF-8 BOM; it was read as part of the first name."""
    trace, _ = load_trace(write(tmp_path, "\ufeffarrival_s,duration_s\n0,10\n2.5,5\n"))
    assert trace.arrival_s.tolist() == [0.0, 2.5]


def test_a_missing_column_shows_the_names_found_with_invisible_characters(tmp_path: Path) -> None:
    with pytest.raises(PlannerInputError) as info:
        load_trace(write(tmp_path, "arrival_s\u200b,duration_s\n0,10\n"))
    assert "missing column(s) arrival_s; found 'arrival_s\\u200b', 'duration_s'" in str(info.value)


def test_an_epoch_timed_trace_counts_from_its_first_arrival(tmp_path: Path) -> None:
    trace, notes = load_trace(write(tmp_path, "arrival_s,duration_s\n1733140900,60\n1733140800.5,30\n"))
    assert trace.arrival_s.tolist() == [0.0, 99.5]
    assert trace.duration_s.tolist() == [30.0, 60.0]
    assert notes.shifted_by_s == 1733140800.5
    assert notes.unsorted_rows == 1
    note = notes.shift_note()
    assert note is not None
    assert "epoch times" in note
    assert "2024-12-02T12:00:00.500000Z" in note


def test_a_late_but_not_epoch_start_is_kept(tmp_path: Path) -> None:
    trace, notes = load_trace(write(tmp_path, "arrival_s,duration_s\n5000000,60\n"))
    assert trace.arrival_s.tolist() == [5e6]
    assert notes.shift_note() is None


def test_unsorted_trace_is_sorted_and_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "arrival_s,duration_s,function\n0,1,a\n5,2,b\n3,3,c\n9,4,d\n")
    trace, notes = load_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 3.0, 5.0, 9.0]
    assert trace.duration_s.tolist() == [1.0, 3.0, 2.0, 4.0]
    assert trace.function == ("a", "c", "b", "d")
    assert notes.unsorted_rows == 1
    assert notes.first_unsorted_line == 4


def test_unsorted_trace_refused_with_line(tmp_path: Path) -> None:
    path = write(tmp_path, "arrival_s,duration_s\n0,1\n5,2\n3,3\n")
    with pytest.raises(PlannerInputError, match="line 4"):
        load_trace(path, on_unsorted="refuse")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PlannerInputError, match="cannot read"):
        load_trace(tmp_path / "nope.csv")


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    trace = Trace(np.array([0.0, 1.5]), np.array([3.25, 4.0]), ("a", "b"))
    write_trace(tmp_path / "t.csv", trace)
    again, _ = load_trace(tmp_path / "t.csv")
    assert again.arrival_s.tolist() == [0.0, 1.5]
    assert again.duration_s.tolist() == [3.25, 4.0]


@pytest.mark.parametrize(
    ("spec", "median"),
    [
        ("fixed:120", 120.0),
        ("uniform:80,120", 100.0),
        ("lognormal:median=240,p95=420", 240.0),
        ("exponential:mean=100", 100 * math.log(2)),
        ("exponential:50", 50 * math.log(2)),
    ],
)
def test_distribution_specs(spec: str, median: float) -> None:
    dist = parse_distribution(spec)
    assert dist.median == pytest.approx(median)
    rng = random.Random(1)
    samples = sorted(dist.sample(rng) for _ in range(4001))
    assert samples[2000] == pytest.approx(median, rel=0.08)


def test_lognormal_p95() -> None:
    dist = parse_distribution("lognormal:median=240,p95=420")
    assert dist.quantile(0.95) == pytest.approx(420.0)


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "fixed",
        "fixed:",
        "fixed:abc",
        "gamma:1,2",
        "uniform:5,1",
        "fixed:-1",
        "lognormal:median=240",
        "lognormal:median=500,p95=100",
        "uniform:1",
    ],
)
def test_bad_distribution_specs_name_the_flag(spec: str) -> None:
    with pytest.raises(PlannerInputError, match="--provision-delay"):
        parse_distribution(spec)


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("none", "none"),
        ("warm:5", "warm:5"),
        ("scheduled:08:00=50,20:00=5", "scheduled:08:00=50,20:00=5"),
        ("predictive", "predictive:10"),
        ("predictive:30", "predictive:30"),
    ],
)
def test_policy_specs(spec: str, name: str) -> None:
    assert parse_policy(spec, ClusterSettings()).name == name


@pytest.mark.parametrize(
    "spec",
    ["warm", "warm:x", "warm:-1", "scheduled:25:00=1", "scheduled:08:00", "predictive:x", "static", "bogus"],
)
def test_bad_policy_specs(spec: str) -> None:
    with pytest.raises(PlannerInputError, match="--policy"):
        parse_policy(spec, ClusterSettings())


def test_synthetic_shape_and_reproducibility() -> None:
    spec = SyntheticSpec(days=2, seed=4, bursts_per_day=2.0)
    trace = generate(spec)
    again = generate(spec)
    assert np.array_equal(trace.arrival_s, again.arrival_s)
    assert not np.array_equal(trace.arrival_s, generate(SyntheticSpec(days=2, seed=5)).arrival_s)
    assert np.all(np.diff(trace.arrival_s) >= 0)
    grid, conc = concurrency_profile(trace)
    assert 3000 * 0.95 <= conc.max() <= 4000 * 1.05
    burst = np.array([f == "burst" for f in trace.function or ()])
    quiet = Trace(trace.arrival_s[~burst], trace.duration_s[~burst])
    grid, conc = concurrency_profile(quiet)
    settled = conc[(grid > 3600) & (grid < 2 * 86_400 - 3600)]
    assert settled.min() >= 35
    assert settled.max() <= 230
    assert np.percentile(settled, 5) >= 50
    assert np.percentile(settled, 95) <= 200


def test_synthetic_rejects_bad_spec() -> None:
    with pytest.raises(PlannerInputError, match="--days"):
        SyntheticSpec(days=0)
