"""The planner's inputs: the cluster model's knobs (planner/settings.py) and the commands' own
(below), each declared once (elasticityops/knobs.py). They come from flags over a YAML config file
over the declared defaults. A YAML key is spelled like its flag (`scale-down-after`;
`scale_down_after` is accepted too); a flag typed on the command line wins over the file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from elasticityops.knobs import BadValue, Spec, build, knob, problems, specs
from elasticityops.planner.distributions import Distribution
from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.settings import ClusterSettings

T = TypeVar("T")


_MOST_WINDOWS = 100
_LONGEST_WINDOW_S = 604_800  # a week


def _windows(raw: Any) -> tuple[float, ...]:
    items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    try:
        values = tuple(float(x) for x in items)
    except (TypeError, ValueError):
        raise ValueError(f"cannot parse {raw!r}; expected seconds like 300,600,1200") from None
    if not 1 <= len(values) <= _MOST_WINDOWS or any(not 0 <= v <= _LONGEST_WINDOW_S for v in values):
        raise ValueError(f"need 1 to {_MOST_WINDOWS} windows, each 0 to {_LONGEST_WINDOW_S} s")
    return values


def _policies(raw: Any) -> tuple[str, ...]:
    return tuple(str(p) for p in raw) if isinstance(raw, list | tuple) else (str(raw),)


@dataclass(frozen=True)
class CommonOptions:
    """Options of both `eops plan run` and `eops plan recommend`."""

    trace: Path | None = knob(
        None,
        unit="file",
        shown="none, required",
        help="Trace CSV: arrival_s,duration_s[,function,gpu_type,priority].",
    )
    out: Path | None = knob(
        None,
        metavar="DIR",
        shown="none, print only",
        help="Directory for summary, per-request CSV, plots, HTML.",
    )
    strict_order: bool = knob(False, off="sort", help="Refuse an unsorted trace instead of sorting it.")
    no_plots: bool = knob(False, off=None, help="Skip PNG and HTML output.")


@dataclass(frozen=True)
class RunOptions:
    policy: tuple[str, ...] = knob(
        ("none",),
        parse=_policies,
        shown="none",
        help="none | static | warm:K | scheduled:HH:MM=K,... | predictive[:W] (a pool for the "
        "forecast load, steered on its late share) | predictive-rate[:W] (the earlier rule, from "
        "arrival and departure rates); repeat to compare.",
    )
    target_wait: float = knob(
        10.0,
        unit="seconds",
        ge=0,
        le=86_400,
        help="p95 time-to-start target of `predictive` and `predictive-rate` without :W.",
    )


@dataclass(frozen=True)
class RecommendOptions:
    p95_wait: float = knob(10.0, unit="seconds", ge=0, le=86_400, help="Target p95 time-to-start.")
    margin: float = knob(0.2, unit="fraction", ge=0, le=10, help="GPU quota margin over the peak nodes.")
    windows: tuple[float, ...] = knob(
        (300.0, 600.0, 1200.0),
        unit="seconds",
        shown="300,600,1200",
        parse=_windows,
        help="Scale-down windows to try, comma-separated.",
    )
    workers: int = knob(
        0,
        unit="processes",
        ge=0,
        le=1024,
        shown="0, one per core",
        help="Settings simulated at once, each in a process of its own; 1: one at a time, here.",
    )


@dataclass(frozen=True)
class SyntheticSpec:
    """What `eops plan trace` makes (planner/synthetic.py generates it): a diurnal baseline, the
    peak at `peak_hour` (0-24, trace time of day), and bursts."""

    days: float = knob(30.0, unit="days", gt=0, le=3650, help="Trace length.")
    seed: int = knob(0, ge=0, le=4_294_967_295, help="Random seed.")
    baseline_min: float = knob(
        60.0, unit="jobs", ge=0, le=1_000_000, help="Concurrent jobs at the daily trough."
    )
    baseline_max: float = knob(
        180.0, unit="jobs", ge=0, le=1_000_000, help="Concurrent jobs at the daily peak."
    )
    peak_hour: float = 14.0
    mean_duration_s: float = knob(
        300.0,
        flag="mean-duration",
        unit="seconds",
        gt=0,
        le=604_800,
        help="Mean baseline job length (lognormal, sigma 0.8).",
    )
    bursts_per_day: float = knob(1.0, unit="per day", ge=0, le=1000, help="Mean number of bursts (Poisson).")
    burst_peak_min: float = knob(
        3000.0,
        unit="jobs",
        ge=0,
        le=1_000_000,
        help="Lowest concurrency a burst reaches (uniform between min and max).",
    )
    burst_peak_max: float = knob(
        4000.0, unit="jobs", ge=0, le=1_000_000, help="Highest concurrency a burst reaches."
    )
    burst_ramp_s: float = knob(
        300.0,
        flag="burst-ramp",
        unit="seconds",
        gt=0,
        le=86_400,
        help="A burst's jobs arrive uniformly over this span.",
    )
    burst_duration_median_s: float = knob(
        1200.0,
        flag="burst-duration",
        unit="seconds",
        gt=0,
        le=604_800,
        help="Median burst job length (lognormal, sigma 0.25).",
    )

    def __post_init__(self) -> None:
        found = problems(self, lambda k: k.flag)
        if found:
            raise PlannerInputError(found[0].render())
        if self.baseline_min > self.baseline_max:
            raise PlannerInputError("--baseline-min must be <= --baseline-max")
        if self.burst_peak_min > self.burst_peak_max:
            raise PlannerInputError("--burst-peak-min must be <= --burst-peak-max")


@dataclass(frozen=True)
class ImportOptions:
    """What `eops plan import` reads from a request log and how it makes the trace
    (planner/log_import.py reads, planner/log_scaling.py windows and scales)."""

    time_column: str = knob(
        "timestamp",
        metavar="NAME",
        help="Column (CSV header name or JSON key) with each request's arrival: ISO 8601 in any "
        "time zone, or epoch seconds.",
    )
    duration_column: str = knob(
        "duration_s", metavar="NAME", help="Column with each request's run time in seconds."
    )
    end_column: str | None = knob(
        None,
        metavar="NAME",
        shown="none",
        help="Column with each request's end time (a time like --time-column); used instead of "
        "--duration-column.",
    )
    function_column: str | None = knob(
        None, metavar="NAME", shown="none", help="Column carried into the trace as `function`."
    )
    gpu_type_column: str | None = knob(
        None, metavar="NAME", shown="none", help="Column carried into the trace as `gpu_type`."
    )
    timezone: str = knob(
        "UTC",
        metavar="ZONE",
        help="Zone of times written without an offset: UTC, an offset like +08:00, or a name like "
        "Asia/Shanghai.",
    )
    epoch_unit: str = knob("s", choices=("s", "ms", "us"), help="Unit of times written as numbers.")
    start: str | None = knob(
        None,
        flag="from",
        metavar="TIME",
        shown="first arrival",
        help="Window start (ISO 8601 or epoch seconds); arrival_s counts from here.",
    )
    end: str | None = knob(
        None, flag="to", metavar="TIME", shown="last arrival", help="Window end (exclusive)."
    )
    scale_to: float | None = knob(
        None,
        unit="GPUs",
        gt=0,
        le=1_000_000,
        shown="none, as logged",
        help="Target mean offered concurrency over the window (busy GPUs if every request started "
        "on arrival).",
    )
    scale_method: str = knob(
        "auto",
        choices=("auto", "superpose", "thin"),
        help="superpose time-shifted copies of the log, or thin it; auto: superpose to scale up, "
        "thin to scale down.",
    )
    max_shift_s: float = knob(
        1800.0,
        flag="max-shift",
        unit="seconds",
        ge=0,
        le=604_800,
        help="Each superposed copy is shifted by a whole number of seconds drawn uniformly from "
        "[-this, this].",
    )
    seed: int = knob(0, ge=0, le=4_294_967_295, help="Seeds the shifts and the thinning (numpy default_rng).")
    format: str = knob(
        "auto",
        choices=("auto", "csv", "jsonl"),
        help="Log format; auto: JSON lines if the file starts with {, else CSV.",
    )


SEARCHED = ("baseline", "scale-down-after")
"""Cluster knobs that `recommend` searches, so it takes them neither as flags nor as keys."""


def load_config(path: Path, allowed: Iterable[str]) -> dict[str, Any]:
    """Read a YAML mapping whose keys are flag names (without `--`)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlannerInputError(f"--config: cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise PlannerInputError(f"--config: {path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PlannerInputError(f"--config: {path} must be a mapping of flag names to values")
    allowed_set = set(allowed)
    out: dict[str, Any] = {}
    for key, value in data.items():
        flag = str(key).strip().lstrip("-").replace("_", "-")
        if flag not in allowed_set:
            raise PlannerInputError(
                f"--config: {path}: unknown key {key!r}; "
                f"keys are flag names: {', '.join(sorted(allowed_set))}"
            )
        out[flag] = value
    return out


def cluster_knobs(searched: Sequence[str] = ()) -> list[Spec]:
    return [k for k in specs(ClusterSettings) if k.name not in searched]


def read_inputs(
    given: Mapping[str, Any], config: Path | None, command: type[T], searched: Sequence[str] = ()
) -> tuple[ClusterSettings, CommonOptions, T]:
    """The cluster settings, the common options and the `command`'s own options, from `given`
    (knob name -> value typed on the command line) over the YAML file `config`."""
    kinds: list[type[Any]] = [ClusterSettings, CommonOptions, command]
    owner = {k.name: (kind, k) for kind in kinds for k in specs(kind)}
    loaded = load_config(config, owner) if config else {}
    for name in searched:
        if name in loaded:
            raise PlannerInputError(f"--config: {name!r} is searched by recommend; leave it out")
    values: dict[type[Any], dict[str, Any]] = {kind: {} for kind in kinds}
    for name, raw in {**loaded, **given}.items():
        kind, knob_spec = owner[name]
        try:
            values[kind][knob_spec.path] = knob_spec.parse(raw)
        except BadValue as bad:
            origin = "" if name in given else f" in {config}"
            fix = f"; {bad.fix}" if bad.fix else ""
            raise PlannerInputError(f"{knob_spec.flag}: {bad.problem}{origin}{fix}") from None
    return (
        build(ClusterSettings(), values[ClusterSettings]),
        build(CommonOptions(), values[CommonOptions]),
        build(command(), values[command]),
    )


def settings_dict(settings: ClusterSettings) -> dict[str, Any]:
    """Flag-named, JSON-ready view of the settings (for summary.json)."""
    out: dict[str, Any] = {}
    for knob_spec in specs(ClusterSettings):
        value = getattr(settings, knob_spec.path)
        out[knob_spec.name] = str(value) if isinstance(value, Distribution) else value
    out["price-effective"] = settings.node_price_per_hour
    return out
