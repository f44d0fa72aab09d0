"""`eops dev-cluster`: a real local control plane with simulated GKE T4 nodes (kwok)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from elasticityops.cli.devcluster_set import (
    DEFAULT_WORKERS,
    SET_PODS_READY_S,
    cluster_option,
    set_status,
    up_set,
    usage_error,
)
from elasticityops.cli.devcluster_set import kubeconfig as set_kubeconfig
from elasticityops.cli.devcluster_set import start as start_cluster
from elasticityops.cli.devcluster_set import stockout as stock_out
from elasticityops.cli.devcluster_set import stop as stop_cluster
from elasticityops.cli.help_screen import App

app = App(
    help="A local Kubernetes control plane (etcd, API server, controller-manager, scheduler) with "
    "simulated GKE GPU nodes (kwok) and upstream's cluster-autoscaler (its kwok provider).",
    no_args_is_help=True,
)
console = Console(stderr=True)

if TYPE_CHECKING:
    from elasticityops.devcluster.build import AutoscalerWanted
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.paths import Toolchain

_DEFAULT_STATE = Path(os.environ.get("EOPS_DEV_CLUSTER_DIR", "~/.local/state/elasticityops/dev-cluster"))
StateDir = typer.Option(
    _DEFAULT_STATE,
    "--state-dir",
    metavar="DIR",
    help="Where the cluster keeps its state, logs and kubeconfig.",
)


def _build_with_progress(
    autoscaler: AutoscalerWanted = "if-found", with_helm: bool = False, kueue: bool = False
) -> Toolchain:
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
            elif ev.kind == "unavailable":
                progress.add_task(f"{ev.component} (not built)", total=1, completed=0, detail=ev.detail)
            elif ev.kind == "start":
                tasks[ev.component] = progress.add_task(f"build {ev.component}", total=ev.total, detail="")
            elif ev.kind == "package":
                progress.update(tasks[ev.component], advance=1, detail=ev.detail[-60:])
            elif ev.kind == "linked":
                task = tasks[ev.component]
                progress.update(task, completed=ev.total, detail=ev.detail)

        toolchain = ensure_built(allow_build=True, progress=on_event, autoscaler=autoscaler, kueue=kueue)
        if with_helm:
            from elasticityops.devcluster.build import ensure_helm, ensure_operator_crds

            console.print(f"helm: {ensure_helm(progress=on_event).binary}")
            crds = ensure_operator_crds(progress=on_event)
            console.print(f"ServiceMonitor CRD: {crds.servicemonitor}")
        return toolchain


@app.command()
def build(
    require_autoscaler: bool = typer.Option(
        False,
        "--require-autoscaler",
        help="Fail if the real cluster-autoscaler's source is not found (CI sets it); without it, "
        "a missing source only skips that binary. The source: ../shared/third_party/ beside the "
        "project, or EOPS_AUTOSCALER_SRC (a clone of tag cluster-autoscaler-1.36.1).",
    ),
    kueue: bool = typer.Option(False, "--kueue", help="Build Kueue's manager too (for `up --kueue`)."),
) -> None:
    """Build (or reuse) the pinned binaries: the control plane and kwok from the Go module proxy,
    cluster-autoscaler from its source, and helm and the Prometheus operator's ServiceMonitor CRD
    (the chart's tests); a cold build takes ~28 min on 2 cores."""
    from elasticityops.devcluster.errors import DevClusterError

    try:
        tc = _build_with_progress(
            "required" if require_autoscaler else "if-found", with_helm=True, kueue=kueue
        )
    except DevClusterError as exc:
        console.print(f"[red]build failed:[/] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"binaries in {tc.bin_dir}")
    if tc.autoscaler is not None:
        console.print(f"cluster-autoscaler: {tc.autoscaler.binary}")
    if tc.kueue is not None:
        console.print(f"kueue: {tc.kueue.binary}")


@app.command()
def up(
    state_dir: Path = StateDir,
    baseline: int = typer.Option(
        2, metavar="NODES", help="Nodes in the static T4 pool (no node group: never scaled)."
    ),
    max_nodes: int = typer.Option(
        100,
        metavar="NODES",
        help="GPU quota: at most this many nodes in all, the static pool included (--max-nodes-total).",
    ),
    provision_delay: str = typer.Option(
        "fixed:60",
        metavar="DISTRIBUTION",
        help="Seconds from a new node's creation to Ready (boot), a delay spec as in eops plan: "
        "fixed:60, uniform:40,80, lognormal:median=60,p95=120 or exponential:mean=60 (a bare number "
        "is refused: write fixed:60). Sampled per node.",
    ),
    driver_delay: str = typer.Option(
        "fixed:60",
        metavar="DISTRIBUTION",
        help="Seconds from Ready to nvidia.com/gpu allocatable (GKE's driver install), a delay spec "
        "as for --provision-delay; the GPU is 0 until then.",
    ),
    stockout_zone: list[str] = typer.Option(
        [],
        "--stockout-zone",
        metavar="ZONE[/GPU_TYPE]",
        help="A zone whose new nodes never become Ready (repeat for more), or ZONE/GPU_TYPE for "
        "one type's group there (us-central1-a/nvidia-tesla-t4): the autoscaler's own time-out "
        "and back-off move the work to another group.",
    ),
    scale_down_after: float = typer.Option(
        600.0,
        metavar="SECONDS",
        help="Seconds a node must be unneeded before removal (--scale-down-unneeded-time).",
    ),
    scan_interval: float = typer.Option(
        10.0, metavar="SECONDS", help="Seconds between two autoscaler loops (--scan-interval)."
    ),
    autoscaling: bool = typer.Option(
        True, help="Run the cluster-autoscaler (--no-autoscaling: the static pool only)."
    ),
    max_node_provision_time: float = typer.Option(
        900.0,
        metavar="SECONDS",
        help="Seconds a new node may take to register and turn Ready before the autoscaler gives "
        "it up and backs its group off (--max-node-provision-time and --max-node-startup-time).",
    ),
    balance_zones: bool = typer.Option(
        False,
        help="Split each scale-up over a GPU type's zone groups, as GKE's BALANCED location policy "
        "does (--balance-similar-node-groups); off, upstream grows one group per scale-up.",
    ),
    kueue: bool = typer.Option(
        False,
        "--kueue",
        help="Run Kueue (the cluster's own job queueing, built from the Go module proxy) beside "
        "the control plane, its webhooks on 127.0.0.1.",
    ),
    multikueue: bool = typer.Option(
        False,
        "--multikueue",
        help="Start a MultiKueue set instead of one cluster (implies --kueue): a manager control "
        "plane without nodes whose Kueue dispatches each Job to a worker, and --workers dev "
        "clusters (the flags above apply to each worker), one sub-directory of --state-dir each.",
    ),
    dispatcher: str | None = typer.Option(
        None,
        "--dispatcher",
        metavar="DISPATCHER",
        help="With --multikueue: how the manager's Kueue picks the workers a Workload is copied "
        "to: all-at-once (Kueue's default), incremental (up to three per 5-minute round), or "
        "gateway (an external dispatcher: `eops serve --kube-nominate-wait S` nominates; "
        "docs/multi-cluster.md).",
    ),
    pods_ready_timeout: float | None = typer.Option(
        None,
        "--pods-ready-timeout",
        metavar="SECONDS",
        help="With --kueue or --multikueue: Kueue's waitForPodsReady, a Workload whose pod is not "
        f"ready this long after admission is evicted and queued again; on a MultiKueue worker the "
        f"manager then dispatches it again, so work leaves a stocked-out region (--multikueue: "
        f"default {SET_PODS_READY_S:g}; 0: off, as upstream's default).",
    ),
    kueue_feature_gate: list[str] = typer.Option(
        [],
        "--kueue-feature-gate",
        metavar="NAME=BOOL",
        help="With --kueue or --multikueue: a Kueue feature gate on top of its defaults, BOOL "
        "true or false, once per gate (every Kueue of a set gets it); e.g. "
        "WorkloadRequestUseMergePatch=true, which writes Workloads by merge patch instead of "
        'server-side apply (docs/kueue.md, "How fast").',
    ),
    worker_qps: float | None = typer.Option(
        None,
        "--multikueue-worker-qps",
        metavar="QPS",
        help="With --multikueue: the rate of the manager's Kueue clients to each worker (burst "
        "twice it). Kueue v0.17.0 keeps client-go's 5 QPS, set nowhere (kueue#14973); later "
        "releases reuse clientConnection behind a gate, and the dev cluster's Kueue build carries "
        "a patch that stands in for it (docs/multi-cluster.md). Default: upstream's 5.",
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        metavar="N",
        help=f"With --multikueue: how many worker clusters (default {DEFAULT_WORKERS}, at most 4), each in "
        "a region of its own (us-central1, us-east4, europe-west4, us-west1: --stockout-zone names "
        "any of their zones).",
    ),
) -> None:
    """Build if needed, then start the cluster (or, --multikueue, the set) and print how to use it."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.multikueue import worker_settings

    _check_set_flags(multikueue, workers, dispatcher)
    if worker_qps is not None and not multikueue:
        usage_error(
            "up", "--multikueue-worker-qps: the rate of a MultiKueue manager's clients; add --multikueue"
        )
    if worker_qps is not None and not 0 < worker_qps <= 100_000:
        usage_error("up", f"--multikueue-worker-qps: {worker_qps:g} is out of range; give 1 to 100000")
    pods_ready_s = _pods_ready_s(pods_ready_timeout, kueue, multikueue)
    gates = _kueue_gates(kueue_feature_gate, kueue or multikueue)
    try:
        settings = AutoscalerSettings(
            enabled=autoscaling,
            baseline=baseline,
            max_nodes=max_nodes,
            provision_delay=provision_delay,
            driver_delay=driver_delay,
            stockout_zones=tuple(stockout_zone),
            scale_down_after=scale_down_after,
            scan_interval=scan_interval,
            max_node_provision_time=max_node_provision_time,
            balance_zones=balance_zones,
        )
        if multikueue:  # each worker in a region of its own, with the stocked-out zones there
            worker_settings(settings, DEFAULT_WORKERS if workers is None else workers)
        else:
            settings = settings.validated()
    except ValueError as exc:
        usage_error("up", str(exc))
    try:
        tc = _build_with_progress("required" if autoscaling else "if-found", kueue=kueue or multikueue)
        cfg = ClusterConfig(
            state_dir=state_dir.expanduser(),
            autoscaler=settings,
            kueue=kueue or multikueue,
            pods_ready_timeout_s=pods_ready_s,
            kueue_feature_gates=gates,
        )
        if multikueue:
            chosen = DEFAULT_WORKERS if workers is None else workers
            up_set(cfg, chosen, tc, dispatcher or "all-at-once", worker_qps or 0.0)
            return
        with console.status("starting") as status:

            def step(name: str) -> None:
                status.update(f"starting {name}")
                console.log(f"{name}")

            cluster = DevCluster.start(cfg, tc, step)
    except (DevClusterError, ValueError) as exc:
        console.print(f"[red]dev-cluster up failed:[/] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"[green]dev cluster up[/] at {cluster.server}")
    console.print(f"export KUBECONFIG={cluster.kubeconfig_path}")
    # The kubectl built with the control plane, for machines that have none of their own.
    console.print(f"kubectl of the same version: {tc.binary('kubectl')}")
    console.print(f"stop it with: eops dev-cluster down --state-dir {cluster.state_dir}")


def _pods_ready_s(given: float | None, kueue: bool, multikueue: bool) -> float | None:
    """Kueue's waitForPodsReady timeout from --pods-ready-timeout (None: off)."""
    if given is None:
        return SET_PODS_READY_S if multikueue else None
    if not (kueue or multikueue):
        usage_error("up", "--pods-ready-timeout: a setting of Kueue; add --kueue or --multikueue")
    if given < 0:
        usage_error("up", f"--pods-ready-timeout: {given:g} is negative; give seconds, or 0 for off")
    return given or None


_GATE = re.compile(r"[A-Z][A-Za-z0-9]{1,99}")


def _kueue_gates(given: list[str], kueue: bool) -> tuple[tuple[str, bool], ...]:
    """--kueue-feature-gate NAME=true|false, each once, as (name, on) pairs."""
    from elasticityops.devcluster.kueue_setup import with_feature_gates

    flag = "--kueue-feature-gate"
    if given and not kueue:
        usage_error("up", f"{flag}: a setting of Kueue; add --kueue or --multikueue")
    gates: dict[str, bool] = {}
    for item in given:
        name, sep, value = item.partition("=")
        on = {"true": True, "false": False}.get(value.strip().lower())
        if not sep or on is None or not _GATE.fullmatch(name.strip()):
            usage_error(
                "up", f"{flag} {item!r}: give NAME=true or NAME=false, e.g. WorkloadRequestUseMergePatch=true"
            )
        if name.strip() in gates:
            usage_error("up", f"{flag}: {name.strip()} given twice; give each gate once")
        gates[name.strip()] = on
    try:
        with_feature_gates({}, gates)
    except ValueError as exc:
        usage_error("up", f"{flag}: {exc}")
    return tuple(gates.items())


def _check_set_flags(multikueue: bool, workers: int | None, dispatcher: str | None) -> None:
    """The flags of a MultiKueue set given only with --multikueue, and each one sound."""
    from elasticityops.devcluster.kueue_setup import DISPATCHERS
    from elasticityops.devcluster.multikueue import check_workers

    if workers is not None and not multikueue:
        usage_error("up", "--workers: only a MultiKueue set has workers; add --multikueue")
    if dispatcher is not None and not multikueue:
        usage_error("up", "--dispatcher: only a MultiKueue set dispatches; add --multikueue")
    if dispatcher is not None and dispatcher not in DISPATCHERS:
        usage_error("up", f"--dispatcher: {dispatcher!r} is none of {', '.join(DISPATCHERS)}")
    if multikueue:
        try:
            check_workers(DEFAULT_WORKERS if workers is None else workers)
        except ValueError as exc:
            usage_error("up", str(exc))


@app.command()
def down(state_dir: Path = StateDir) -> None:
    """Stop every process of the cluster (or of each cluster of a MultiKueue set) by PID;
    nothing is left running."""
    from elasticityops.devcluster.cluster import down as stop
    from elasticityops.devcluster.cluster_set import down_set

    by_cluster = down_set(state_dir.expanduser())
    if by_cluster:
        for name, stopped_there in by_cluster.items():
            console.print(
                f"{name}: stopped {', '.join(stopped_there) or 'nothing was running'}", soft_wrap=True
            )
        return
    stopped = stop(state_dir.expanduser())
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@app.command()
def status(
    state_dir: Path = StateDir,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    stuck_after: float = typer.Option(
        30.0,
        "--stuck-after",
        metavar="SECONDS",
        help="Report pods bound to a Ready kwok-managed node and still Pending (no container "
        "started) for longer than this, counted from the later of binding and the node's "
        "readiness (JSON key stuck_pods).",
    ),
) -> None:
    """Show the cluster's processes, nodes, the simulated cloud, the autoscaler's own status and
    stuck pods; of a MultiKueue set, each cluster's processes and nodes and whether the manager's
    Kueue reaches each worker."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.multikueue import read_record

    if read_record(state_dir.expanduser().resolve()) is not None:
        set_status(state_dir, as_json)
        return
    try:
        cluster = DevCluster.attach(state_dir.expanduser())
    except DevClusterError as exc:
        console.print(f"not running: {exc}")
        raise typer.Exit(1) from exc
    alive = cluster.processes_alive()
    cloud = _cloud(cluster)
    real = _autoscaler_said(cluster, alive)
    stuck = _stuck(cluster, alive, stuck_after)
    if as_json:
        seen = {"server": cluster.server, "processes": alive, "cloud": cloud, "cluster_autoscaler": real}
        typer.echo(json.dumps({**seen, "stuck_pods": stuck}, indent=2))
        return
    _print_status(cluster, alive, cloud, real)
    _print_stuck(stuck, stuck_after)
    if not all(alive.values()):
        raise typer.Exit(1)


def _cloud(cluster: DevCluster) -> dict[str, Any]:
    """The simulated cloud's last status, or {} while it has written none."""
    try:
        return cluster.cloud_status()
    except (OSError, ValueError):
        return {}


def _autoscaler_said(cluster: DevCluster, alive: dict[str, bool]) -> str | None:
    """The cluster-autoscaler's own status text, or why it could not be read; None without one."""
    from elasticityops.domain.errors import EopsError

    if not (cluster.runs_autoscaler and alive.get("kube-apiserver")):
        return None
    try:
        return cluster.autoscaler_status()
    except EopsError as exc:
        return f"(unreadable: {exc.message})"


def _stuck(cluster: DevCluster, alive: dict[str, bool], after: float) -> list[dict[str, object]] | str:
    """The stuck pods as JSON objects, or why they could not be read; none while the API is down."""
    from elasticityops.domain.errors import EopsError

    if not alive.get("kube-apiserver"):
        return []
    try:
        return [p.to_json() for p in cluster.stuck_pods(after)]
    except EopsError as exc:
        return f"(unreadable: {exc.message})"


def _print_status(
    cluster: DevCluster, alive: dict[str, bool], cloud: dict[str, Any], real: str | None
) -> None:
    table = Table("component", "pid", "running")
    for rec in cluster.state.processes:
        table.add_row(rec.name, str(rec.pid), "yes" if alive[rec.name] else "[red]no[/]")
    console.print(f"server {cluster.server}  kubeconfig {cluster.kubeconfig_path}")
    console.print(table)
    if cloud:
        console.print(f"nodes {cloud['nodes']}")
    if cluster.runs_autoscaler:
        console.print("cluster-autoscaler status (kube-system/cluster-autoscaler-status):")
        console.print(real or "(not written yet)", markup=False, highlight=False)


def _print_stuck(stuck: list[dict[str, object]] | str, after: float) -> None:
    if isinstance(stuck, str):
        console.print(f"stuck pods: {stuck}")
        return
    if not stuck:
        console.print(f"stuck pods: none (bound to a Ready kwok node, Pending > {after:g}s)")
        return
    console.print(f"[red]{len(stuck)} stuck pod(s)[/] (bound to a Ready kwok node, Pending > {after:g}s):")
    stuck_table = Table("pod", "node", "seconds")
    for p in stuck:
        stuck_table.add_row(f"{p['namespace']}/{p['name']}", str(p["node"]), f"{p['seconds']:.0f}")
    console.print(stuck_table)


@app.command()
def kubeconfig(
    state_dir: Path = StateDir,
    cluster: str | None = cluster_option("the cluster whose kubeconfig to print"),
) -> None:
    """Print the path of the cluster's kubeconfig (use: export KUBECONFIG=$(eops dev-cluster kubeconfig)).
    Exits 1 when no cluster is running there: a kubeconfig left by `down` points at nothing."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.components import Layout
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.multikueue import read_record

    root = state_dir.expanduser().resolve()
    if cluster is not None or read_record(root) is not None:
        set_kubeconfig(state_dir, cluster)
        return
    path = Layout(root).kubeconfig
    try:
        running = DevCluster.attach(root).processes_alive().get("kube-apiserver", False)
    except DevClusterError:
        running = False
    if not running or not path.is_file():
        stale = f" (the kubeconfig {path} is left from a cluster that was stopped)" if path.is_file() else ""
        hint = "start one with `eops dev-cluster up`"
        typer.echo(f"no dev cluster is running in {root}{stale}; {hint}", err=True)
        raise typer.Exit(1)
    typer.echo(str(path))


@app.command()
def stockout(
    state_dir: Path = StateDir,
    cluster: str | None = cluster_option("the worker whose zones to stock out"),
    zone: list[str] = typer.Option(
        [],
        "--zone",
        metavar="ZONE[/GPU_TYPE]",
        help="A zone whose new nodes never become Ready (repeat for more), or ZONE/GPU_TYPE for one "
        "type's group there, as `up --stockout-zone`.",
    ),
    every: bool = typer.Option(False, "--all", help="Every zone of the cluster (instead of --zone)."),
    off: bool = typer.Option(False, "--off", help="Give the zones their capacity back instead."),
) -> None:
    """Stock a running cluster's zones out (or, --off, back in) live: the simulated cloud applies it
    within a second; nodes already Ready stay."""
    stock_out(state_dir, cluster, zone, every, off)


@app.command()
def stop(
    state_dir: Path = StateDir,
    cluster: str = typer.Option(
        ..., "--cluster", metavar="NAME", help="The set's cluster to stop (worker-1, ..., or manager)."
    ),
) -> None:
    """Stop one cluster of a MultiKueue set by PID, as if its machines went away; its ports,
    certificates and etcd data stay for `start`."""
    stop_cluster(state_dir, cluster)


@app.command()
def start(
    state_dir: Path = StateDir,
    cluster: str = typer.Option(
        ..., "--cluster", metavar="NAME", help="The set's cluster to start again (worker-1, ..., or manager)."
    ),
) -> None:
    """Start a cluster of a MultiKueue set that `stop` stopped, with the same ports, certificates
    and etcd data; returns once each of its processes is ready."""
    start_cluster(state_dir, cluster)
