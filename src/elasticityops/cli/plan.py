"""`eops plan`: replay traffic through the cluster model (run), make traces (trace) or import them
from request logs (import), search for the cheapest setting meeting a wait target (recommend).
`eops plan --trace T ...` is `eops plan run`.
Bad input prints one line naming the row, flag or key and exits 2."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from elasticityops.cli.help_screen import App, Group
from elasticityops.cli.knob_options import environ, knob_options
from elasticityops.cli.progress import Steps
from elasticityops.domain.errors import InvalidInput
from elasticityops.knobs import load, spec, specs
from elasticityops.planner.config import (
    SEARCHED,
    CommonOptions,
    ImportOptions,
    RecommendOptions,
    RunOptions,
    SyntheticSpec,
    cluster_knobs,
    read_inputs,
    settings_dict,
)
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


class _RunByDefault(Group):
    """`eops plan --trace T ...` means `eops plan run --trace T ...`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = App(
    cls=_RunByDefault,
    help="Capacity planner: replay a trace through a model of GPU node provisioning "
    "(`eops plan --trace T --policy warm:50` runs it).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# ---- options: the knobs of planner/config.py and planner/settings.py, each declared once ---------
Config = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="YAML file; every key is a flag name; flags win over it."),
]
_COMMON = ("Trace and output", specs(CommonOptions))
_CLUSTER = "Cluster model"
_POLICY = spec(RunOptions, "policy")


def _typed(ctx: typer.Context, name: str) -> bool:
    return getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"


@contextmanager
def _clean_errors() -> Iterator[None]:
    """Bad input: one line on stderr, exit code 2, no traceback."""
    try:
        yield
    except (PlannerInputError, ModelStalledError, InvalidInput) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _check_out_dir(out: Path) -> None:
    """--out must be a directory we can write, checked before the run (which may take minutes),
    not after it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PlannerInputError(f"--out: {out} is a file, not a directory; name a directory") from None
    except OSError as exc:
        raise PlannerInputError(f"--out: cannot make {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise PlannerInputError(f"--out: cannot write in {out} (permission denied); name another directory")


def _load(common: CommonOptions) -> tuple[Trace, list[str]]:
    if common.trace is None:
        raise PlannerInputError("--trace is required (a CSV, or make one with `eops plan trace`)")
    if common.out is not None:
        _check_out_dir(common.out)
    from elasticityops.planner.trace import load_trace

    trace, notes = load_trace(common.trace, on_unsorted="refuse" if common.strict_order else "sort")
    messages = []
    if notes.unsorted_rows:
        messages.append(
            f"trace was not sorted by arrival_s ({notes.unsorted_rows} rows out of order, "
            f"first at line {notes.first_unsorted_line}); sorted it"
        )
        err_console.print(f"[yellow]note:[/yellow] {messages[-1]}", highlight=False)
    shifted = notes.shift_note()
    if shifted:
        messages.append(shifted)
        err_console.print(f"[yellow]note:[/yellow] {escape(shifted)}", highlight=False)
    return trace, messages


def _print_table(title: str, summaries: list[Summary]) -> None:
    from elasticityops.planner.report import table_rows

    # At 80 columns (a pipe's width) a narrow column folds its policy's name: never cut with "…".
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for s in summaries:
        table.add_column(s.policy, justify="right", overflow="fold")
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
        # The setting is what the reader looks for: whole on one line, the numbers' headers wrap.
        if name == "setting":
            table.add_column(name, no_wrap=True)
        else:
            table.add_column(name, justify="right")
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


@app.command("run")
@knob_options(
    _COMMON,
    ("Run", [k for k in specs(RunOptions) if k is not _POLICY]),
    (_CLUSTER, cluster_knobs()),
)
def run_cmd(
    ctx: typer.Context,
    given: dict[str, Any],
    policy: Annotated[
        list[str], typer.Option("--policy", metavar="POLICY", help=escape(_POLICY.help), show_default=True)
    ] = list(_POLICY.default),  # noqa: B006 (Typer passes a new list, never this one)
    config: Config = None,
) -> None:
    """Replay a trace under one or more policies; print a table, write --out DIR."""
    from elasticityops.planner.outputs import write_run
    from elasticityops.planner.policies import parse_policy
    from elasticityops.planner.runner import run_policy

    with _clean_errors():
        typed = {**given, "policy": policy} if _typed(ctx, "policy") else given
        settings, common, options = read_inputs(typed, config, RunOptions)
        choices = [parse_policy(p, settings, options.target_wait) for p in options.policy]
        loaded, notes = _load(common)
        outcomes = []
        with Steps(err_console, "simulating", len(choices)) as step:
            for k, choice in enumerate(choices):
                step(k, len(choices), choice.name)
                outcomes.append(run_policy(loaded, settings, choice))
        _print_table(
            f"{len(loaded):,} requests over {loaded.span_s / 3600:,.1f} h, "
            f"${settings.node_price_per_hour:.2f}/node-hour",
            [o.summary for o in outcomes],
        )
        if common.out is not None:
            written = write_run(common.out, loaded, outcomes, notes, plots=not common.no_plots)
            console.print(f"wrote {len(written)} files to {common.out}")


@app.command("trace")
@knob_options(("Trace shape", specs(SyntheticSpec)))
def trace_cmd(
    given: dict[str, Any],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="CSV file to write.")],
) -> None:
    """Write a synthetic trace: a diurnal baseline of 60-180 concurrent jobs with bursts to 3,000-4,000."""
    from elasticityops.planner.synthetic import concurrency_profile, generate
    from elasticityops.planner.trace import write_trace

    with _clean_errors():
        shape = load(SyntheticSpec(), environ(specs(SyntheticSpec)), given)
        made = generate(shape)
        try:
            write_trace(out, made)
        except OSError as exc:
            raise PlannerInputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None
        _, conc = concurrency_profile(made)
        console.print(
            f"wrote {len(made):,} requests over {shape.days:g} days to {out} "
            f"(peak concurrency {int(conc.max()) if len(conc) else 0:,})"
        )


@app.command("import")
@knob_options(("Import", specs(ImportOptions)))
def import_cmd(
    given: dict[str, Any],
    log: Annotated[
        Path,
        typer.Argument(
            metavar="LOG", help="Request log: CSV with a header, or JSON lines.", show_default=False
        ),
    ],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Trace CSV to write.")],
    keep: Annotated[
        list[str],
        typer.Option(
            "--keep",
            metavar="COLUMN=VALUE[,VALUE...]",
            help="Import only rows whose COLUMN is one of the values; repeat for several columns.",
        ),
    ] = [],  # noqa: B006 (Typer passes a new list, never this one)
) -> None:
    """Make a trace from a request log with absolute times (ISO 8601 or epoch seconds), optionally
    a window of it scaled to a target mean concurrency."""
    from elasticityops.planner.log_import import (
        LogColumns,
        RowFilter,
        TimeReading,
        parse_time,
        parse_zone,
        read_log,
    )
    from elasticityops.planner.log_scaling import Scaling, to_trace
    from elasticityops.planner.trace import write_trace

    with _clean_errors():
        options = load(ImportOptions(), environ(specs(ImportOptions)), given)
        reading = TimeReading(parse_zone(options.timezone), options.epoch_unit)
        bounds = []
        for flag, text in (("--from", options.start), ("--to", options.end)):
            try:
                bounds.append(None if text is None else parse_time(text, reading))
            except ValueError as exc:
                raise PlannerInputError(f"{flag}: {text!r} {exc}") from None
        columns = LogColumns(
            time=options.time_column,
            duration=options.duration_column,
            end=options.end_column,
            function=options.function_column,
            gpu_type=options.gpu_type_column,
        )
        filters = [RowFilter.parse(k) for k in keep]
        read = read_log(log, columns, reading=reading, keep=filters, fmt=options.format)
        scaling = (
            None
            if options.scale_to is None
            else Scaling(options.scale_to, options.scale_method, options.max_shift_s, options.seed)
        )
        made = to_trace(read, start_epoch_s=bounds[0], end_epoch_s=bounds[1], scaling=scaling)
        try:
            write_trace(out, made.trace)
        except OSError as exc:
            raise PlannerInputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None
        _report_import(log, out, read.rows_read, read.rows_dropped, made)


def _report_import(log: Path, out: Path, rows: int, dropped: int, made: Any) -> None:
    from datetime import UTC, datetime

    start = datetime.fromtimestamp(made.start_epoch_s, UTC).isoformat().replace("+00:00", "Z")
    kept = f" ({dropped:,} dropped by --keep)" if dropped else ""
    console.print(
        f"read {rows:,} rows of {log}{kept}; window from {start} (arrival_s 0), {made.span_s / 3600:,.1f} h"
    )
    how = ""
    if made.copies > 1:
        how = f", {made.copies} time-shifted copies superposed"
    elif made.kept_share < 1.0:
        how = f", thinned to {made.kept_share:.1%} of the requests"
    console.print(
        f"wrote {len(made.trace):,} requests to {out}: mean offered concurrency "
        f"{made.mean_before:,.3g} GPUs as logged -> {made.mean_after:,.3g}{how}"
    )


@app.command("recommend")
@knob_options(_COMMON, ("Recommend", specs(RecommendOptions)), (_CLUSTER, cluster_knobs(SEARCHED)))
def recommend_cmd(given: dict[str, Any], config: Config = None) -> None:
    """Find the cheapest baseline / headroom / scale-down window meeting --p95-wait; show the frontier
    and the GPU quota to request."""
    from elasticityops.planner.outputs import write_recommendation
    from elasticityops.planner.recommend import recommend

    with _clean_errors():
        settings, common, options = read_inputs(given, config, RecommendOptions, SEARCHED)
        target = options.p95_wait
        loaded, notes = _load(common)
        with Steps(err_console, "simulating", 1) as step:
            rec = recommend(
                loaded,
                settings,
                target,
                windows=options.windows,
                margin=options.margin,
                progress=step,
                workers=options.workers,
            )
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
            f"GPU quota to request: {rec.quota_gpus:,} (peak {s.peak_nodes:,} + {options.margin:.0%}); "
            f"at {settings.pool_size_limit:,} nodes per pool that is {rec.node_pools} auto-provisioned "
            f"pool(s)"
        )
        if common.out is not None:
            written = write_recommendation(
                common.out, rec, settings_dict(settings), notes, plots=not common.no_plots
            )
            console.print(f"wrote {len(written)} files to {common.out}")
