"""`eops dev-cluster` on a MultiKueue set (`up --multikueue`): which cluster a command means
(`--cluster`), the set's start, and the commands that act on one of its clusters: `kubeconfig`,
`stockout`, `stop` and `start`. Here the dev cluster and `eops render kueue` meet: each cluster's
queue objects are what that command renders (the import layers keep devcluster and ops apart)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.cluster_set import SetObjects
    from elasticityops.devcluster.config import ClusterConfig
    from elasticityops.devcluster.paths import Toolchain

console = Console(stderr=True)
DEFAULT_WORKERS = 2
# A set's workers evict a Workload whose pod is not ready this long after admission (Kueue's
# waitForPodsReady): a pod waiting for a node in a stocked-out region goes back to the manager,
# which dispatches it again. Well above a healthy scale-up with `up`'s default delays (a 10-s
# autoscaler loop, 60 s to boot, 60 s to install the driver), or healthy work is moved too.
SET_PODS_READY_S = 300.0
SET_NAMESPACE = "default"  # where the set's LocalQueue `eops` is, on the manager and every worker


def usage_error(command: str, message: str) -> NoReturn:
    """Bad input: one line naming the flag and the fix, exit 2."""
    # Not through rich: it would wrap the line at the terminal's width.
    typer.echo(f"dev-cluster {command}: {message}", err=True)
    raise typer.Exit(2)


def cluster_option(what: str) -> Any:
    return typer.Option(
        None,
        "--cluster",
        metavar="NAME",
        help=f"With a MultiKueue set (`up --multikueue`): {what} (manager, worker-1, worker-2, ...).",
    )


def target(command: str, state_dir: Path, cluster: str | None) -> DevCluster:
    """The dev cluster `--cluster` names in the set under `state_dir`, or the one cluster there
    where `state_dir` holds no set. Exit 2 for a name that does not fit, 1 when nothing runs."""
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.multikueue import read_record

    root = state_dir.expanduser().resolve()
    record = read_record(root)
    if record is None and cluster is not None:
        alone = "" if command in ("stop", "start") else ", or leave --cluster out for its one cluster"
        usage_error(
            command,
            f"--cluster {cluster}: {root} holds no MultiKueue set (`up --multikueue`); name the set's "
            f"directory with --state-dir{alone}",
        )
    if record is not None and cluster is None:
        usage_error(
            command, f"--cluster: {root} holds a MultiKueue set; name one of {', '.join(record.names)}"
        )
    where = root
    if record is not None:
        assert cluster is not None
        try:
            where = root / record.check_name(cluster)
        except ValueError as exc:
            usage_error(command, str(exc))
    try:
        return DevCluster.attach(where)
    except DevClusterError as exc:
        console.print(f"not running: {exc}; start one with `eops dev-cluster up`")
        raise typer.Exit(1) from exc


def set_objects(workers: int, max_nodes: int) -> SetObjects:
    """Each worker's ClusterQueue holds its GPU quota (as many T4 and L4 GPUs as its quota of
    nodes); the manager's, the sum over the workers. No capacity check on the workers: a Job
    waits for its node there as without Kueue."""
    from elasticityops.devcluster.cluster_set import SetObjects
    from elasticityops.devcluster.config import GPU_TYPES
    from elasticityops.ops.kueue import NO_PROVISIONING, KueueInputs, kueue_manifests
    from elasticityops.ops.kueue_multikueue import manager_objects

    def objects(gpus: int) -> list[dict[str, object]]:
        budget = ",".join(f"{kind}={max(gpus, 1)}" for kind in GPU_TYPES)
        return kueue_manifests(
            KueueInputs(gpu_budget=budget, namespace=SET_NAMESPACE, provisioning_class=NO_PROVISIONING)
        )

    def manager(kubeconfigs: dict[str, str]) -> list[dict[str, object]]:
        return manager_objects(objects(max_nodes * workers), kubeconfigs)

    return SetObjects(worker=objects(max_nodes), manager=manager)


def up_set(
    cfg: ClusterConfig, workers: int, tc: Toolchain, dispatcher: str = "all-at-once", worker_qps: float = 0.0
) -> None:
    """`up --multikueue`: start the set, print where each cluster is. `dispatcher`: a key of
    kueue_setup.DISPATCHERS; `worker_qps`: the manager's clients to the workers (0: upstream's)."""
    from elasticityops.devcluster.cluster_set import up_set as start_set
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.kueue_setup import DISPATCHERS, MultiKueueManager

    with console.status("starting") as status:

        def step(name: str) -> None:
            status.update(f"starting {name}")
            console.log(name)

        try:
            clusters = start_set(
                cfg.state_dir,
                cfg,
                workers,
                set_objects(workers, cfg.autoscaler.max_nodes),
                tc,
                MultiKueueManager(dispatcher=DISPATCHERS[dispatcher], worker_qps=worker_qps),
                step=step,
            )
        except (DevClusterError, ValueError) as exc:
            console.print(f"[red]dev-cluster up failed:[/] {exc}")
            raise typer.Exit(1) from exc
    console.print(
        f"[green]MultiKueue set up[/] in {clusters.record.up_seconds:.0f} s: {', '.join(clusters.names)}",
        soft_wrap=True,  # paths stay whole on one line, to be copied
    )
    for name, cluster in clusters.each().items():
        console.print(f"  {name:<9} {cluster.server}  kubeconfig {cluster.kubeconfig_path}", soft_wrap=True)
    manager = clusters.manager.kubeconfig_path
    console.print(
        f"submit to the manager: export KUBECONFIG={manager} (LocalQueue eops in {SET_NAMESPACE})",
        soft_wrap=True,
    )
    if dispatcher == "gateway":
        console.print(
            "the manager's Kueue waits for the gateway to nominate workers: serve with "
            "--kube-nominate-wait 30 (docs/multi-cluster.md)",
            soft_wrap=True,
        )
    console.print(f"stop it with: eops dev-cluster down --state-dir {clusters.root}", soft_wrap=True)


def kubeconfig(state_dir: Path, cluster: str | None) -> None:
    """`kubeconfig`: the path of the cluster's kubeconfig, only while its API server runs."""
    root = state_dir.expanduser().resolve()
    running = target("kubeconfig", state_dir, cluster)
    path = running.kubeconfig_path
    if not running.processes_alive().get("kube-apiserver", False) or not path.is_file():
        stale = f" (the kubeconfig {path} is left from a cluster that was stopped)" if path.is_file() else ""
        hint = f"eops dev-cluster start --cluster {cluster}"
        typer.echo(f"the set's {cluster} is not running in {root}{stale}; start it with `{hint}`", err=True)
        raise typer.Exit(1)
    typer.echo(str(path))


def check_stockout_flags(zones: list[str], every: bool) -> None:
    """ValueError naming the flags unless exactly one of --zone and --all is given."""
    if every == bool(zones):
        given = "both given" if every else "neither given"
        raise ValueError(
            f"--zone or --all ({given}): name zones with --zone ZONE (repeatable) or all with --all"
        )


def stockout_zones(
    current: tuple[str, ...], zones: list[str], every: bool, off: bool, region: str
) -> tuple[str, ...]:
    """The stocked-out zones of a cluster in `region` after `stockout`: `zones` (or, `every`,
    every zone of the region) added, or with `off` taken away. ValueError naming the flag for a
    zone the cluster has not."""
    from elasticityops.devcluster.config import GPU_TYPES
    from elasticityops.devcluster.nodes import zones_of

    check_stockout_flags(zones, every)
    here = zones_of(region)
    for entry in zones:
        zone, slash, kind = entry.partition("/")
        if zone not in here or (slash and kind not in GPU_TYPES):
            raise ValueError(
                f"--zone {entry}: no such zone in this cluster's region {region}; use ZONE or "
                f"ZONE/GPU_TYPE with ZONE one of {', '.join(here)} and GPU_TYPE one of {', '.join(GPU_TYPES)}"
            )
    if every:
        return () if off else here
    if off:
        return tuple(z for z in current if z not in zones)
    return (*current, *(z for z in zones if z not in current))


def stockout(state_dir: Path, cluster: str | None, zones: list[str], every: bool, off: bool) -> None:
    from elasticityops.devcluster.multikueue import MANAGER

    try:
        check_stockout_flags(zones, every)  # the flags, before any cluster is looked for
    except ValueError as exc:
        usage_error("stockout", str(exc))
    if cluster == MANAGER:
        usage_error("stockout", "--cluster manager: the manager has no nodes; name a worker")
    running = target("stockout", state_dir, cluster)
    if not running.processes_alive().get("cloud", False):
        console.print(
            f"[red]dev-cluster stockout:[/] the simulated cloud of {running.state_dir} is not running"
        )
        raise typer.Exit(1)
    settings = running.autoscaler_settings
    try:
        chosen = stockout_zones(settings.stockout_zones, zones, every, off, settings.region)
    except ValueError as exc:
        usage_error("stockout", str(exc))
    after = running.configure_cloud(stockout_zones=chosen).stockout_zones
    name = cluster or str(running.state_dir)
    typer.echo(f"{name}: stocked out: {', '.join(after) or 'none'}")


def stop(state_dir: Path, cluster: str) -> None:
    running = target("stop", state_dir, cluster)
    stopped = running.stop_processes()
    typer.echo(f"{cluster}: stopped {', '.join(stopped) or 'nothing (it was not running)'}")


def start(state_dir: Path, cluster: str) -> None:
    from elasticityops.devcluster.errors import DevClusterError

    running = target("start", state_dir, cluster)
    try:
        started = running.start_processes()
    except DevClusterError as exc:
        console.print(f"[red]dev-cluster start:[/] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(f"{cluster}: started {', '.join(started)} at {running.server}")


def _member(cluster: DevCluster) -> dict[str, Any]:
    try:
        cloud = cluster.cloud_status()
    except (OSError, ValueError):  # the manager has no cloud; a worker's writes its first soon
        cloud = {}
    return {
        "server": cluster.server,
        "processes": cluster.processes_alive(),
        "nodes": cloud.get("nodes"),
        "region": (cloud.get("settings") or {}).get("region"),
        "stockout_zones": (cloud.get("settings") or {}).get("stockout_zones"),
    }


def _status_line(name: str, member: dict[str, Any], active: bool | None) -> str:
    alive = member["processes"]
    down = [p for p, up in alive.items() if not up]
    line = f"{name:<9} {member['server']}  processes {len(alive) - len(down)}/{len(alive)} running"
    if down:
        line += f" (down: {', '.join(down)})"
    nodes = member["nodes"]
    if nodes:
        line += f"  region {member['region']}"
        line += f"  nodes: {nodes.get('baseline', 0)} baseline, {nodes.get('autoscaled', 0)} autoscaled"
        line += f"  stocked out: {', '.join(member['stockout_zones'] or []) or 'none'}"
    if active is not None:
        line += f"  MultiKueue: {'Active' if active else 'inactive'}"
    return line


def set_status(state_dir: Path, as_json: bool) -> None:
    """`status` of a MultiKueue set: each cluster's processes, nodes and stocked-out zones, and
    whether the manager's Kueue reaches each worker (its MultiKueueCluster is Active). Exit 1
    when a process of any cluster is not running."""
    import json

    from elasticityops.devcluster.cluster_set import ClusterSet, cluster_states
    from elasticityops.domain.errors import EopsError

    clusters = ClusterSet.attach(state_dir)
    seen = {name: _member(cluster) for name, cluster in clusters.each().items()}
    active: dict[str, bool] | str
    try:
        active = cluster_states(clusters.manager)
    except EopsError as exc:
        active = f"(unreadable: {exc.message})"
    if as_json:
        typer.echo(json.dumps({"clusters": seen, "multikueue_active": active}, indent=2))
    else:
        for name, member in seen.items():
            typer.echo(_status_line(name, member, None if isinstance(active, str) else active.get(name)))
        if isinstance(active, str):
            typer.echo(f"MultiKueueClusters on the manager: {active}")
    if not all(all(m["processes"].values()) for m in seen.values()):
        raise typer.Exit(1)
