"""`eops plan`: replay traffic through the cluster model (run), make traces (trace), search for the
cheapest setting meeting a wait target (recommend). `eops plan --trace T ...` is `eops plan run`.
Bad input prints one line naming the row, flag or key and exits 2."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from elasticityops.planner.config import SETTINGS_FLAGS, build_settings, load_config, merge, settings_dict
from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.model import ModelStalledError

if TYPE_CHECKING:
    # numpy-backed modules load only when a plan command runs, so every other `eops` command
    # starts without paying for them.
    from elasticityops.planner.recommend import Recommendation
    from elasticityops.planner.summary import Summary
    from elasticityops.planner.trace import Trace

console = Console()
err_console = Console(stderr=True)


class _RunByDefault(TyperGroup):
    """`eops plan --trace T ...` means `eops plan run --trace T ...`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_RunByDefault,
    help="Capacity planner: replay a trace through a model of GPU node provisioning "
    "(`eops plan --trace T --policy warm:50` runs it).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# ---- options shared by run and recommend (help written once) ------------------------------------
Config = Annotated[Path | None, typer.Option("--config", help="YAML file; every key is a flag name.")]
TraceOpt = Annotated[
    Path | None, typer.Option("--trace", help="Trace CSV: arrival_s,duration_s[,function,gpu_type,priority].")
]
Out = Annotated[
    Path | None, typer.Option("--out", help="Directory for summary, per-request CSV, plots, HTML.")
]
StrictOrder = Annotated[
    bool | None,
    typer.Option("--strict-order/--sort", help="Refuse an unsorted trace (default: sort it and say so)."),
]
NoPlots = Annotated[bool | None, typer.Option("--no-plots", help="Skip PNG and HTML output.")]
Baseline = Annotated[
    int | None, typer.Option("--baseline", help="Fixed pool nodes, never scaled down. [default: 0]")
]
MaxNodes = Annotated[
    int | None, typer.Option("--max-nodes", help="GPU quota / max nodes, baseline included. [default: 5000]")
]
NodePools = Annotated[
    int | None, typer.Option("--node-pools", help="Auto-provisioned pools (pool-zones). [default: 5]")
]
PoolLimit = Annotated[
    int | None, typer.Option("--pool-size-limit", help="Nodes per auto-provisioned pool. [default: 1000]")
]
ScanInterval = Annotated[
    float | None, typer.Option("--scan-interval", help="Autoscaler loop period, s. [default: 10]")
]
GpuDelay = Annotated[
    float | None,
    typer.Option(
        "--gpu-scale-up-delay",
        help="Autoscaler waits until the oldest pending GPU pod is this old, s. [default: 30]",
    ),
]
ProvDelay = Annotated[
    str | None,
    typer.Option(
        "--provision-delay",
        help="Node provisioning time: fixed:120, uniform:80,120, exponential:mean=200, "
        "lognormal:median=240,p95=420 (default).",
    ),
]
MaxProv = Annotated[
    float | None,
    typer.Option("--max-provision-time", help="Give up on a node after this long, s. [default: 900]"),
]
ScaleDown = Annotated[
    float | None,
    typer.Option("--scale-down-after", help="Remove a node empty for this long, s. [default: 600]"),
]
SdParallel = Annotated[
    int | None, typer.Option("--scale-down-parallelism", help="Most nodes removed per loop. [default: 10]")
]
NodeDeleteTime = Annotated[
    float | None,
    typer.Option("--node-delete-time", help="Seconds one node deletion is in flight. [default: 0]"),
]
SdAfterAdd = Annotated[
    float | None,
    typer.Option(
        "--scale-down-delay-after-add", help="No scale-down this long after a scale-up, s. [default: 600]"
    ),
]
SdAfterFail = Annotated[
    float | None,
    typer.Option(
        "--scale-down-delay-after-failure", help="No scale-down this long after a failure, s. [default: 180]"
    ),
]
Stockout = Annotated[
    float | None,
    typer.Option("--stockout-probability", help="Chance a scale-up fails (stockout). [default: 0]"),
]
BackoffInit = Annotated[
    float | None, typer.Option("--backoff-initial", help="First back-off after a failure, s. [default: 300]")
]
BackoffMax = Annotated[
    float | None, typer.Option("--backoff-max", help="Longest back-off, s. [default: 1800]")
]
BackoffReset = Annotated[
    float | None, typer.Option("--backoff-reset", help="Back-off forgotten after, s. [default: 10800]")
]
Preempt = Annotated[
    float | None, typer.Option("--preemption-rate", help="Spot preemptions per node-hour. [default: 0]")
]
Spot = Annotated[
    bool | None,
    typer.Option(
        "--spot/--on-demand",
        help="Price nodes at spot ($0.24/h) or on-demand ($0.54/h). [default: on-demand]",
    ),
]
Price = Annotated[float | None, typer.Option("--price", help="Price per node-hour, USD (overrides --spot).")]
MinBilled = Annotated[
    float | None, typer.Option("--min-billed", help="Minimum billed seconds per node. [default: 60]")
]
HrInterval = Annotated[
    float | None, typer.Option("--headroom-interval", help="Headroom controller period, s. [default: 10]")
]
RateWindow = Annotated[
    float | None, typer.Option("--rate-window", help="Window of the recent arrival rate, s. [default: 60]")
]
Horizon = Annotated[
    float | None,
    typer.Option("--horizon", help="Simulate at least until this time, s. [default: last request's end]"),
]
TimelineStep = Annotated[
    float | None, typer.Option("--timeline-step", help="Timeline sampling period, s. [default: 60]")
]
Seed = Annotated[
    int | None,
    typer.Option("--seed", help="Random seed (provisioning, stockouts, preemptions). [default: 0]"),
]


@contextmanager
def _clean_errors() -> Iterator[None]:
    """Bad input: one line on stderr, exit code 2, no traceback."""
    try:
        yield
    except (PlannerInputError, ModelStalledError) as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _values(ctx: typer.Context, config: Path | None, command_keys: set[str]) -> dict[str, Any]:
    given = {"COMMANDLINE", "ENVIRONMENT"}  # not a default: the flag was written
    flags = {
        name.replace("_", "-"): value
        for name, value in ctx.params.items()
        if name != "config" and getattr(ctx.get_parameter_source(name), "name", "") in given
    }
    loaded = load_config(config, set(SETTINGS_FLAGS) | command_keys) if config else {}
    return merge(loaded, flags)


def _load(values: dict[str, Any]) -> tuple[Trace, list[str]]:
    path = values.get("trace")
    if not path:
        raise PlannerInputError("--trace is required (a CSV, or make one with `eops plan trace`)")
    from elasticityops.planner.trace import load_trace

    trace, notes = load_trace(Path(path), on_unsorted="refuse" if values.get("strict-order") else "sort")
    messages = []
    if notes.unsorted_rows:
        messages.append(
            f"trace was not sorted by arrival_s ({notes.unsorted_rows} rows out of order, "
            f"first at line {notes.first_unsorted_line}); sorted it"
        )
        err_console.print(f"[yellow]note:[/yellow] {messages[-1]}", highlight=False)
    return trace, messages


def _print_table(title: str, summaries: list[Summary]) -> None:
    from elasticityops.planner.report import table_rows

    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for s in summaries:
        table.add_column(s.policy, justify="right")
    for label, cells in table_rows(summaries):
        table.add_row(label, *cells)
    console.print(table)


def _print_frontier(rec: Recommendation, target: float) -> None:
    table = Table(
        title=f"frontier: no other setting is both cheaper and faster ({len(rec.evaluated)} settings run)",
        title_justify="left",
    )
    for name in (
        "setting",
        "p95 wait (s)",
        "p99 wait (s)",
        "waited",
        "cost (USD)",
        "idle GPU-h",
        "peak nodes",
    ):
        table.add_column(name, justify="left" if name == "setting" else "right")
    for c in rec.frontier:
        s = c.summary
        style = "green" if c is rec.best else ("dim" if s.time_to_start_s.p95 > target else "")
        table.add_row(
            c.label,
            f"{s.time_to_start_s.p95:.1f}",
            f"{s.time_to_start_s.p99:.1f}",
            f"{100 * s.waited_share:.1f}%",
            f"{s.cost_usd:,.0f}",
            f"{s.idle_gpu_hours:,.0f}",
            f"{s.peak_nodes:,}",
            style=style,
        )
    console.print(table)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )


def _with_progress(total: int, label: str) -> tuple[Progress, Callable[[int, int, str], None]]:
    bar = _progress()
    task = bar.add_task(label, total=total)

    def update(done: int, total_now: int, what: str) -> None:
        bar.update(task, completed=done, total=max(total_now, done), description=f"{label} {what}")

    return bar, update


RUN_KEYS = {"trace", "policy", "out", "target-wait", "strict-order", "no-plots"}
RECOMMEND_KEYS = {"trace", "p95-wait", "out", "margin", "windows", "strict-order", "no-plots"}


@app.command("run")
def run_cmd(
    ctx: typer.Context,
    trace: TraceOpt = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help="none | static | warm:K | scheduled:HH:MM=K,... | predictive[:W]; repeat to compare.",
        ),
    ] = None,
    target_wait: Annotated[
        float | None,
        typer.Option("--target-wait", help="p95 time-to-start target for `predictive`, s. [default: 10]"),
    ] = None,
    out: Out = None,
    config: Config = None,
    strict_order: StrictOrder = None,
    no_plots: NoPlots = None,
    baseline: Baseline = None,
    max_nodes: MaxNodes = None,
    node_pools: NodePools = None,
    pool_size_limit: PoolLimit = None,
    scan_interval: ScanInterval = None,
    gpu_scale_up_delay: GpuDelay = None,
    provision_delay: ProvDelay = None,
    max_provision_time: MaxProv = None,
    scale_down_after: ScaleDown = None,
    scale_down_parallelism: SdParallel = None,
    node_delete_time: NodeDeleteTime = None,
    scale_down_delay_after_add: SdAfterAdd = None,
    scale_down_delay_after_failure: SdAfterFail = None,
    stockout_probability: Stockout = None,
    backoff_initial: BackoffInit = None,
    backoff_max: BackoffMax = None,
    backoff_reset: BackoffReset = None,
    preemption_rate: Preempt = None,
    spot: Spot = None,
    price: Price = None,
    min_billed: MinBilled = None,
    headroom_interval: HrInterval = None,
    rate_window: RateWindow = None,
    horizon: Horizon = None,
    timeline_step: TimelineStep = None,
    seed: Seed = None,
) -> None:
    """Replay a trace under one or more policies; print a table, write --out DIR."""
    from elasticityops.planner.outputs import write_run
    from elasticityops.planner.policies import parse_policy
    from elasticityops.planner.runner import run_policy

    with _clean_errors():
        values = _values(ctx, config, RUN_KEYS)
        settings = build_settings(values)
        specs = values.get("policy") or ["none"]
        specs = [specs] if isinstance(specs, str) else list(specs)
        wait = _number(values, "target-wait", 10.0)
        choices = [parse_policy(str(p), settings, wait) for p in specs]
        loaded, notes = _load(values)
        outcomes = []
        bar, update = _with_progress(len(choices), "simulating")
        with bar:
            for k, choice in enumerate(choices):
                update(k, len(choices), choice.name)
                outcomes.append(run_policy(loaded, settings, choice))
            update(len(choices), len(choices), "done")
        _print_table(
            f"{len(loaded):,} requests over {loaded.span_s / 3600:,.1f} h, "
            f"${settings.node_price_per_hour:.2f}/node-hour",
            [o.summary for o in outcomes],
        )
        if values.get("out"):
            written = write_run(
                Path(values["out"]), loaded, outcomes, notes, plots=not values.get("no-plots")
            )
            console.print(f"wrote {len(written)} files to {values['out']}")


@app.command("trace")
def trace_cmd(
    out: Annotated[Path, typer.Option("--out", help="CSV file to write.")],
    days: Annotated[float, typer.Option("--days", help="Trace length in days.")] = 30.0,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    baseline_min: Annotated[
        float, typer.Option("--baseline-min", help="Concurrent jobs at the daily trough.")
    ] = 60.0,
    baseline_max: Annotated[
        float, typer.Option("--baseline-max", help="Concurrent jobs at the daily peak.")
    ] = 180.0,
    mean_duration: Annotated[
        float, typer.Option("--mean-duration", help="Mean baseline job length, s.")
    ] = 300.0,
    bursts_per_day: Annotated[float, typer.Option("--bursts-per-day", help="Mean bursts per day.")] = 1.0,
    burst_peak_min: Annotated[
        float, typer.Option("--burst-peak-min", help="Lowest burst peak, concurrent jobs.")
    ] = 3000.0,
    burst_peak_max: Annotated[
        float, typer.Option("--burst-peak-max", help="Highest burst peak, concurrent jobs.")
    ] = 4000.0,
    burst_ramp: Annotated[
        float, typer.Option("--burst-ramp", help="A burst's jobs arrive over this span, s.")
    ] = 300.0,
    burst_duration: Annotated[
        float, typer.Option("--burst-duration", help="Median burst job length, s.")
    ] = 1200.0,
) -> None:
    """Write a synthetic trace: a diurnal baseline of 60-180 concurrent jobs with bursts to 3,000-4,000."""
    from elasticityops.planner.synthetic import SyntheticSpec, concurrency_profile, generate
    from elasticityops.planner.trace import write_trace

    with _clean_errors():
        spec = SyntheticSpec(
            days=days,
            seed=seed,
            baseline_min=baseline_min,
            baseline_max=baseline_max,
            mean_duration_s=mean_duration,
            bursts_per_day=bursts_per_day,
            burst_peak_min=burst_peak_min,
            burst_peak_max=burst_peak_max,
            burst_ramp_s=burst_ramp,
            burst_duration_median_s=burst_duration,
        )
        made = generate(spec)
        try:
            write_trace(out, made)
        except OSError as exc:
            raise PlannerInputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None
        _, conc = concurrency_profile(made)
        console.print(
            f"wrote {len(made):,} requests over {days:g} days to {out} "
            f"(peak concurrency {int(conc.max()) if len(conc) else 0:,})"
        )


@app.command("recommend")
def recommend_cmd(
    ctx: typer.Context,
    trace: TraceOpt = None,
    p95_wait: Annotated[
        float | None, typer.Option("--p95-wait", help="Target p95 time-to-start, s. [default: 10]")
    ] = None,
    margin: Annotated[
        float | None, typer.Option("--margin", help="Quota margin over peak nodes. [default: 0.2]")
    ] = None,
    windows: Annotated[
        str | None, typer.Option("--windows", help="Scale-down windows to try, s. [default: 300,600,1200]")
    ] = None,
    out: Out = None,
    config: Config = None,
    strict_order: StrictOrder = None,
    no_plots: NoPlots = None,
    max_nodes: MaxNodes = None,
    node_pools: NodePools = None,
    pool_size_limit: PoolLimit = None,
    scan_interval: ScanInterval = None,
    gpu_scale_up_delay: GpuDelay = None,
    provision_delay: ProvDelay = None,
    max_provision_time: MaxProv = None,
    scale_down_parallelism: SdParallel = None,
    node_delete_time: NodeDeleteTime = None,
    scale_down_delay_after_add: SdAfterAdd = None,
    scale_down_delay_after_failure: SdAfterFail = None,
    stockout_probability: Stockout = None,
    backoff_initial: BackoffInit = None,
    backoff_max: BackoffMax = None,
    backoff_reset: BackoffReset = None,
    preemption_rate: Preempt = None,
    spot: Spot = None,
    price: Price = None,
    min_billed: MinBilled = None,
    headroom_interval: HrInterval = None,
    rate_window: RateWindow = None,
    horizon: Horizon = None,
    timeline_step: TimelineStep = None,
    seed: Seed = None,
) -> None:
    """Find the cheapest baseline / headroom / scale-down window meeting --p95-wait; show the frontier
    and the GPU quota to request."""
    from elasticityops.planner.outputs import write_recommendation
    from elasticityops.planner.recommend import recommend

    with _clean_errors():
        values = _values(ctx, config, RECOMMEND_KEYS)
        for searched in ("baseline", "scale-down-after"):
            if searched in values:
                raise PlannerInputError(f"--config: {searched!r} is searched by recommend; leave it out")
        settings = build_settings(values)
        target = _number(values, "p95-wait", 10.0)
        margin_v = _number(values, "margin", 0.2)
        win = _windows(values.get("windows"))
        loaded, notes = _load(values)
        bar, update = _with_progress(1, "searching")
        with bar:
            rec = recommend(loaded, settings, target, windows=win, margin=margin_v, progress=update)
        _print_frontier(rec, target)
        if rec.best is not None:
            s = rec.best.summary
            console.print(
                f"[green]recommended:[/green] {rec.best.label}: p95 wait {s.time_to_start_s.p95:.1f} s "
                f"<= {target:g} s at ${s.cost_usd:,.0f} (peak {s.peak_nodes:,} nodes)"
            )
        else:
            s = rec.closest.summary
            console.print(
                f"[red]no setting meets p95 <= {target:g} s[/red]; closest: {rec.closest.label} "
                f"with p95 {s.time_to_start_s.p95:.1f} s at ${s.cost_usd:,.0f}"
            )
        console.print(
            f"GPU quota to request: {rec.quota_gpus:,} (peak {s.peak_nodes:,} + {margin_v:.0%}); "
            f"at {settings.pool_size_limit:,} nodes per pool that is {rec.node_pools} auto-provisioned "
            f"pool(s)"
        )
        if values.get("out"):
            written = write_recommendation(
                Path(values["out"]), rec, settings_dict(settings), notes, plots=not values.get("no-plots")
            )
            console.print(f"wrote {len(written)} files to {values['out']}")


def _number(values: dict[str, Any], key: str, default: float) -> float:
    value = values.get(key)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlannerInputError(f"--{key}: invalid value {value!r}") from None
    if not number >= 0:
        raise PlannerInputError(f"--{key}: must be >= 0")
    return number


def _windows(text: Any) -> list[float]:
    if text is None:
        return [300.0, 600.0, 1200.0]
    items = text if isinstance(text, list) else str(text).split(",")
    try:
        values = [float(x) for x in items]
    except ValueError:
        raise PlannerInputError(
            f"--windows: cannot parse {text!r}; expected seconds like 300,600,1200"
        ) from None
    if not values or any(v < 0 for v in values):
        raise PlannerInputError("--windows: need one or more windows >= 0 s")
    return values
