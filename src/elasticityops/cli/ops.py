"""`eops doctor`: check a cluster for everything GPU elasticity needs and explain each fault.

Exit code 0 when nothing fails (warnings allowed), 1 on any failure, 2 on invalid options."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import typer
from rich.console import Console

from elasticityops.ops.gke import GPU_SHAPES


def doctor(
    kubeconfig: Path | None = typer.Option(
        None, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    ),
    context: str | None = typer.Option(None, help="kubeconfig context (default: the current one)"),
    namespace: str | None = typer.Option(
        None, help="namespace ElasticityOps runs Jobs in (default: the context's)"
    ),
    peak: int | None = typer.Option(None, help="planned peak of GPU nodes, to check GPU quota against"),
    gpu_type: str = typer.Option("nvidia-tesla-t4", help="GPU model whose quota to check"),
    project: str | None = typer.Option(None, help="GCP project for the quota check (default: gcloud's)"),
    region: str | None = typer.Option(
        None, help="GCP region for the quota check (default: the nodes' region label)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    timeout: float = typer.Option(10.0, help="seconds per API request"),
) -> None:
    """Check a cluster for GPU elasticity: permissions, GPU nodes, device plugin, metrics, HPAs,
    priorities, Pending pods, quota."""
    err = Console(stderr=True)
    if peak is not None and peak < 1:
        err.print(
            "[red]--peak[/red]: must be at least 1; pass the most GPU nodes you expect at once",
            highlight=False,
        )
        raise typer.Exit(2)
    if gpu_type not in GPU_SHAPES:
        err.print(
            f"[red]--gpu-type[/red]: {gpu_type!r} unknown; use one of {', '.join(GPU_SHAPES)}",
            highlight=False,
        )
        raise typer.Exit(2)
    if kubeconfig is not None and not kubeconfig.is_file():
        err.print(
            f"[red]--kubeconfig[/red]: {kubeconfig} is not a file; pass the path of a kubeconfig",
            highlight=False,
        )
        raise typer.Exit(2)
    # The Kubernetes client loads only when doctor runs, so other commands start faster.
    from elasticityops.ops.doctor.checks import exit_code, run_checks
    from elasticityops.ops.doctor.gather import GatherOptions, gather
    from elasticityops.ops.doctor.report import findings_json, findings_table, summary_line

    options = GatherOptions(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        peak=peak,
        gpu_type=gpu_type,
        project=project,
        region=region,
        gcloud=shutil.which("gcloud"),
        timeout_s=timeout,
    )
    snapshot = asyncio.run(gather(options))
    findings = run_checks(snapshot)
    if as_json:
        typer.echo(findings_json(findings))
    else:
        out = Console(width=max(Console().width, 160))
        out.print(findings_table(findings))
        out.print(summary_line(findings))
    raise typer.Exit(exit_code(findings))


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
