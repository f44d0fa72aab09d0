"""`eops rehearse`: replay a trace through the real gateway against a real cluster, one headroom
policy after another, and set what was measured beside what the planner predicts. Bad input
prints one line naming the flag and the fix and exits 2; Ctrl-C cleans up (gateway, namespace)
and exits 130."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from elasticityops.cli.help_screen import App
from elasticityops.cli.knob_options import environ, knob_options
from elasticityops.domain.errors import InvalidInput
from elasticityops.knobs import specs
from elasticityops.planner.errors import PlannerInputError
from elasticityops.rehearse.options import RehearseOptions

if TYPE_CHECKING:
    from elasticityops.rehearse.driver import PolicyRecord
    from elasticityops.rehearse.prepare import Prepared

console = Console()
err_console = Console(stderr=True)

_HEADROOM_HELP = (
    "A policy in the planner's syntax: none | warm:K | scheduled:HH:MM=K,... | predictive[:W]; "
    "repeat to rehearse several, one after another. Each but none is passed to the gateway as "
    "`eops serve --headroom P`."
)


class _Bars:
    """Rich progress on stderr: what each policy is doing, requests sent and ended."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
        )
        self._tasks: dict[tuple[str, str], TaskID] = {}

    def _task(self, policy: str, kind: str) -> TaskID:
        key = (policy, kind)
        if key not in self._tasks:
            self._tasks[key] = self.bar.add_task(f"{policy}: {kind}", total=self.total)
        return self._tasks[key]

    def phase(self, policy: str, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.bar.console.print(f"[dim]{stamp}[/dim] {escape(policy)}: {escape(text)}", highlight=False)

    def sent(self, policy: str, done: int, total: int) -> None:
        self.bar.update(self._task(policy, "sent"), completed=done, total=total)

    def ended(self, policy: str, done: int, total: int) -> None:
        self.bar.update(self._task(policy, "ended"), completed=done, total=total)


def _print_table(records: list[PolicyRecord]) -> None:
    from elasticityops.rehearse.summary import table_cells

    table = Table(title="rehearsal: measured vs predicted", title_justify="left")
    for name in ("policy", "metric", "measured", "predicted", "difference"):
        table.add_column(name, justify="left" if name in ("policy", "metric") else "right")
    for rec in records:
        for k, (label, measured, predicted, diff) in enumerate(table_cells(rec.run)):
            table.add_row(rec.run.policy if k == 0 else "", label, measured, predicted, diff)
        if rec.run.error:
            table.add_row("", "[red]error[/red]", escape(rec.run.error[:200]), "", "")
        table.add_section()
    console.print(table)


def _fail(exc: Exception) -> None:
    err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@knob_options(("Rehearsal", specs(RehearseOptions)))
def rehearse(
    given: dict[str, Any],
    headroom: Annotated[
        list[str],
        typer.Option("--headroom", metavar="POLICY", help=escape(_HEADROOM_HELP), show_default=True),
    ] = ["none"],  # noqa: B006 (Typer passes a new list, never this one)
) -> None:
    """Replay a trace (in real time) through `eops serve --backend kubernetes` on a real cluster,
    the running dev cluster unless --kubeconfig names another, once per --headroom policy, each
    in a namespace of its own; write DIR/summary.json (measured and predicted per policy), the
    invocations and plots, and print the comparison."""
    from elasticityops.rehearse.prepare import load_options, prepare

    try:
        options = load_options(given, environ(specs(RehearseOptions)))
        prepared = asyncio.run(prepare(options, headroom))
    except (InvalidInput, PlannerInputError) as exc:
        _fail(exc)
        return
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow] before anything started")
        raise typer.Exit(130) from None
    for note in prepared.notes:
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    _run(prepared)


def _run(prepared: Prepared) -> None:
    from elasticityops.rehearse.driver import rehearse as run_all
    from elasticityops.rehearse.report import write_outputs
    from elasticityops.rehearse.summary import describe_trace, summary_payload

    plan = prepared.rehearsal
    bars = _Bars(len(plan.trace))
    err_console.print(
        f"rehearsing {len(plan.trace):,} requests over {plan.trace.span_s / 60:,.1f} min on the "
        f"{prepared.target.where}: {', '.join(plan.policies)} (real time)"
    )
    records: list[PolicyRecord] = []
    interrupted = False
    try:
        with bars.bar:
            asyncio.run(run_all(plan, bars, records))
    except KeyboardInterrupt:
        interrupted = True
        err_console.print(
            "[yellow]interrupted[/yellow]: the gateway was stopped and its namespace deleted; "
            f"{len(records)} of {len(plan.policies)} policies done"
        )
        if not records:
            raise typer.Exit(130) from None
    payload = summary_payload(
        [r.run for r in records],
        trace=describe_trace(plan.trace, str(plan.options.trace), plan.options.warmup),
        cluster=prepared.cluster_dict(),
        planner_settings=prepared.planner_dict(),
        notes=prepared.notes,
    )
    written = write_outputs(plan.out, records, payload, plan.options.warmup)
    _print_table(records)
    console.print(f"wrote {len(written)} files to {plan.out} (summary.json, invocations-*.csv, plots)")
    if interrupted:
        raise typer.Exit(130)
    if any(r.run.error for r in records):
        raise typer.Exit(1)


app = App()
app.command("rehearse")(rehearse)
