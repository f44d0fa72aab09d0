"""`eops dev-cluster`: a real local control plane with simulated GKE T4 nodes (kwok)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    help="A local Kubernetes control plane (etcd, API server, controller-manager, scheduler) with "
    "simulated GKE T4 GPU nodes (kwok) and a node auto-provisioning emulator.",
    no_args_is_help=True,
)
console = Console(stderr=True)

_DEFAULT_STATE = Path(os.environ.get("EOPS_DEV_CLUSTER_DIR", "~/.local/state/elasticityops/dev-cluster"))
StateDir = typer.Option(
    _DEFAULT_STATE, "--state-dir", help="Where the cluster keeps its state, logs and kubeconfig."
)


def _build_with_progress() -> Path:
    from elasticityops.devcluster.build import BuildEvent, ensure_built

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}", style="dim"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def on_event(ev: BuildEvent) -> None:
            if ev.kind == "skipped":
                progress.add_task(f"{ev.component} (cached)", total=1, completed=1, detail="")
            elif ev.kind == "start":
                tasks[ev.component] = progress.add_task(f"build {ev.component}", total=ev.total, detail="")
            elif ev.kind == "package":
                progress.update(tasks[ev.component], advance=1, detail=ev.detail[-60:])
            elif ev.kind == "linked":
                task = tasks[ev.component]
                progress.update(task, completed=ev.total, detail=ev.detail)

        tc = ensure_built(allow_build=True, progress=on_event)
    return tc.root


@app.command()
def build() -> None:
    """Build (or reuse) the pinned binaries from the Go module proxy; first build takes ~25 min."""
    from elasticityops.devcluster.errors import DevClusterError

    try:
        root = _build_with_progress()
    except DevClusterError as exc:
        console.print(f"[red]build failed:[/] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"binaries in {root / 'bin'}")


@app.command()
def up(
    state_dir: Path = StateDir,
    baseline: int = typer.Option(2, help="Nodes in the static T4 pool."),
    max_nodes: int = typer.Option(100, help="GPU quota: at most this many GPU nodes in all."),
    provision_delay: str = typer.Option(
        "fixed:120",
        help="Seconds from scale-up decision to a Ready node, a delay spec as in eops plan: fixed:120, "
        "uniform:80,120, lognormal:median=240,p95=420 or exponential:mean=200 (a bare number is "
        "refused: write fixed:90).",
    ),
    scale_down_after: float = typer.Option(600.0, help="Seconds a node must be idle before removal."),
    gpu_pod_delay: float = typer.Option(30.0, help="Seconds a GPU pod waits before it triggers a scale-up."),
    scan_interval: float = typer.Option(10.0, help="Seconds between two autoscaler cycles."),
    stockout_probability: float = typer.Option(0.0, help="Chance that one provisioning attempt fails."),
    autoscaling: bool = typer.Option(True, help="Run node auto-provisioning (off: static pool only)."),
) -> None:
    """Build if needed, then start the cluster and print how to use it."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.paths import Toolchain

    try:
        root = _build_with_progress()
        settings = AutoscalerSettings(
            enabled=autoscaling,
            baseline=baseline,
            max_nodes=max_nodes,
            provision_delay=provision_delay,
            scale_down_after=scale_down_after,
            gpu_pod_delay=gpu_pod_delay,
            scan_interval=scan_interval,
            stockout_probability=stockout_probability,
        ).validated()
        cfg = ClusterConfig(state_dir=state_dir.expanduser(), autoscaler=settings)
        with console.status("starting") as status:

            def step(name: str) -> None:
                status.update(f"starting {name}")
                console.log(f"{name}")

            cluster = DevCluster.start(cfg, Toolchain(root), step)
    except (DevClusterError, ValueError) as exc:
        console.print(f"[red]dev-cluster up failed:[/] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"[green]dev cluster up[/] at {cluster.server}")
    console.print(f"export KUBECONFIG={cluster.kubeconfig_path}")
    console.print(f"stop it with: eops dev-cluster down --state-dir {cluster.state_dir}")


@app.command()
def down(state_dir: Path = StateDir) -> None:
    """Stop every process of the cluster by PID; nothing is left running."""
    from elasticityops.devcluster.cluster import down as stop

    stopped = stop(state_dir.expanduser())
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@app.command()
def status(
    state_dir: Path = StateDir, as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")
) -> None:
    """Show the cluster's processes, nodes and autoscaler state."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.errors import DevClusterError

    try:
        cluster = DevCluster.attach(state_dir.expanduser())
    except DevClusterError as exc:
        console.print(f"not running: {exc}")
        raise typer.Exit(1) from exc
    alive = cluster.processes_alive()
    try:
        auto = cluster.autoscaler_status()
    except (OSError, ValueError):
        auto = {}
    if as_json:
        typer.echo(json.dumps({"server": cluster.server, "processes": alive, "autoscaler": auto}, indent=2))
        return
    table = Table("component", "pid", "running")
    for rec in cluster.state.processes:
        table.add_row(rec.name, str(rec.pid), "yes" if alive[rec.name] else "[red]no[/]")
    console.print(f"server {cluster.server}  kubeconfig {cluster.kubeconfig_path}")
    console.print(table)
    if auto:
        console.print(f"nodes {auto['nodes']}  pending GPU pods {auto['pending_gpu_pods']}")
    if not all(alive.values()):
        raise typer.Exit(1)


@app.command()
def kubeconfig(state_dir: Path = StateDir) -> None:
    """Print the path of the cluster's kubeconfig (use: export KUBECONFIG=$(eops dev-cluster kubeconfig))."""
    from elasticityops.devcluster.components import Layout

    path = Layout(state_dir.expanduser().resolve()).kubeconfig
    if not path.is_file():
        console.print(f"no kubeconfig in {state_dir}: is the cluster up?")
        raise typer.Exit(1)
    typer.echo(str(path))
