"""`eops doctor`: check a cluster for everything GPU elasticity needs and explain each fault.

Exit code 0 when nothing fails (warnings allowed), 1 on any failure, 2 on invalid options."""

from __future__ import annotations

import asyncio
import shutil
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from elasticityops.cli.help_screen import App
from elasticityops.cli.knob_options import environ, knob_options
from elasticityops.domain.errors import InvalidInput
from elasticityops.knobs import load, specs
from elasticityops.ops.doctor.options import GatherOptions

_DOCTOR = specs(GatherOptions)


@knob_options((None, _DOCTOR))
def doctor(
    given: dict[str, Any],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Check a cluster for GPU elasticity: permissions, GPU nodes, device plugin, metrics, HPAs,
    priorities, Pending pods, quota; with --admission kueue, the Kueue set-up it dispatches through."""
    err = Console(stderr=True)
    try:
        options = load(GatherOptions(gcloud=shutil.which("gcloud")), environ(_DOCTOR), given)
    except InvalidInput as exc:
        for problem in exc.problems:
            fix = f"; {escape(problem.fix)}" if problem.fix else ""
            err.print(f"[red]{problem.field}[/red]: {escape(problem.problem)}{fix}", highlight=False)
        raise typer.Exit(2) from None
    kubeconfig = options.kubeconfig
    if kubeconfig is not None and not kubeconfig.is_file():
        err.print(
            f"[red]--kubeconfig[/red]: {kubeconfig} is not a file; pass the path of a kubeconfig",
            highlight=False,
        )
        raise typer.Exit(2)
    # The Kubernetes client loads only when doctor runs, so other commands start faster.
    from elasticityops.ops.doctor.checks import exit_code, run_checks
    from elasticityops.ops.doctor.gather import gather
    from elasticityops.ops.doctor.report import findings_json, findings_table, summary_line

    snapshot = asyncio.run(gather(options))
    findings = run_checks(snapshot)
    if as_json:
        typer.echo(findings_json(findings))
    else:
        out = Console(width=max(Console().width, 160))
        out.print(findings_table(findings))
        out.print(summary_line(findings))
    raise typer.Exit(exit_code(findings))


app = App()
app.command("doctor")(doctor)
