"""`eops cost`: where the node time went and what it cost, per function, hour or capacity."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from elasticityops.cli import remote, render_cost
from elasticityops.cli.help_screen import App

Grouping = typer.Option(
    "--by",
    metavar="GROUPING",
    help="Group by function, hour, capacity (spot, on-demand, local) and/or cluster (MultiKueue's "
    "workers; repeat for more than one: --by function --by hour); none: one total.",
)


def cost(
    since: Annotated[
        str,
        typer.Option(
            "--since",
            metavar="DURATION|TIME",
            help="How far back: 90m, 24h, 7d, or an ISO 8601 time with its zone.",
        ),
    ] = "24h",
    by: Annotated[list[str] | None, Grouping] = None,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Print CSV: a line per group, a column per phase.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (the API's shape) for machines.")
    ] = False,
) -> None:
    """Node-seconds by phase (provisioning, idle before start, run, idle after, warm capacity
    unused) and their cost, from the machine price table. On the local backend these are
    GPU slot-seconds, priced as the on-demand node of their GPU type."""
    groups = by or []
    with remote.connected() as client:
        if as_csv:
            sys.stdout.write(client.cost_csv(since=since, by=groups))
            return
        report = client.cost_report(since=since, by=groups)
    if as_json:
        remote.print_json(report.model_dump_json())
    else:
        remote.out.print(render_cost.cost_table(report))


app = App()
app.command("cost", help=remote.help_of(cost))(cost)
