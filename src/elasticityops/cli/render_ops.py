"""`eops render gke` and `eops render elasticity`: the ops renders, added to the `render` Typer
app with `register(app)`. The renders are pure; these commands only write files or stdout."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from elasticityops.domain.errors import InvalidInput
from elasticityops.ops.elasticity import ElasticityInputs, parse_label, render_elasticity
from elasticityops.ops.gke import GPU_SHAPES, GkeInputs, expand_zones, render_gke

_err = Console(stderr=True)


def _fail(error: InvalidInput) -> typer.Exit:
    for problem in error.problems:
        _err.print(
            f"[red]--{problem.field}[/red]: {problem.problem}" + (f"; {problem.fix}" if problem.fix else ""),
            highlight=False,
        )
    return typer.Exit(2)


def _emit(files: dict[str, str], out: Path | None, executable: tuple[str, ...] = ()) -> None:
    if out is None:
        for name, text in files.items():
            typer.echo(f"# ===== {name} =====")
            typer.echo(text.rstrip("\n"))
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        if name in executable:
            path.chmod(0o755)
    _err.print(f"wrote {len(files)} files to {out}: {', '.join(files)}", highlight=False)


def gke(
    project: str = typer.Option(..., help="GCP project id"),
    region: str = typer.Option(..., help="GCP region, e.g. us-central1"),
    zones: str = typer.Option(..., help="zones with the GPU: a,b,c or full names"),
    peak: int = typer.Option(..., help="the most GPU nodes (one GPU each) running at once"),
    baseline: int = typer.Option(60, help="always-on GPU nodes for usual traffic (part of the peak)"),
    spot: bool = typer.Option(False, "--spot", help="prefer spot VMs, fall back to on-demand"),
    gpu_type: str = typer.Option("nvidia-tesla-t4", help="GPU model"),
    machine_type: str | None = typer.Option(
        None,
        help="machine for one GPU (default: n1-standard-4 for T4, g2-standard-4 for L4; never n1-standard-1)",
    ),
    fallback_gpu_type: str = typer.Option("nvidia-l4", help="GPU model to fall back to, or 'none'"),
    cluster: str = typer.Option("eops", help="cluster name"),
    margin: int = typer.Option(10, help="percent above the peak for GPU limits and quota"),
    preload_disk_image: str | None = typer.Option(
        None, help="disk image with the function images, for a secondary boot disk"
    ),
    release_channel: str = typer.Option("regular", help="GKE release channel"),
    out: Path | None = typer.Option(
        None, help="directory to write the script and manifests to (default: stdout)"
    ),
) -> None:
    """A reviewed gcloud script and manifests for a GKE cluster sized for the peak."""
    inputs = GkeInputs(
        project=project,
        region=region,
        zones=expand_zones(region, zones.split(",")),
        peak=peak,
        baseline=baseline,
        spot=spot,
        gpu_type=gpu_type,
        machine_type=machine_type
        or (GPU_SHAPES[gpu_type].machine_type if gpu_type in GPU_SHAPES else "n1-standard-4"),
        fallback_gpu_type=None if fallback_gpu_type in ("", "none") else fallback_gpu_type,
        cluster=cluster,
        margin_pct=margin,
        preload_disk_image=preload_disk_image,
        release_channel=release_channel,
    )
    try:
        rendered = render_gke(inputs)
    except InvalidInput as error:
        raise _fail(error) from None
    for warning in rendered.warnings:
        _err.print(f"[yellow]warning[/yellow]: {warning}", highlight=False)
    _emit(rendered.files, out, executable=("create-cluster.sh",))


def elasticity(
    deployment: str = typer.Option(..., help="the GPU Deployment to scale"),
    namespace: str = typer.Option("default", help="its namespace"),
    min_replicas: int = typer.Option(1, "--min", help="minimum replicas (>= 1)"),
    max_replicas: int = typer.Option(8, "--max", help="maximum replicas"),
    target_util: int = typer.Option(70, help="target average GPU utilisation per pod, percent"),
    scale_up_window: int = typer.Option(60, help="scale-up stabilisation window, seconds"),
    scale_down_window: int = typer.Option(300, help="scale-down stabilisation window, seconds"),
    grace_seconds: int = typer.Option(120, help="terminationGracePeriodSeconds for the Deployment"),
    concurrency: int | None = typer.Option(
        None, help="requests one pod serves at once (1 = utilisation is the wrong signal)"
    ),
    selector: str | None = typer.Option(
        None, help="the Deployment's pod labels, k=v,k2=v2 (default app=DEPLOYMENT)"
    ),
    metric_name: str = typer.Option("gpu_utilization", help="custom metric name the adapter exposes"),
    monitoring_namespace: str = typer.Option(
        "gpu-monitoring", help="namespace of DCGM exporter and the adapter"
    ),
    prometheus_url: str = typer.Option(
        "http://prometheus-server.monitoring.svc", help="Prometheus URL for the adapter"
    ),
    prometheus_port: int = typer.Option(80, help="Prometheus port for the adapter"),
    gpu_node_label: str = typer.Option(
        "nvidia.com/gpu.present=true", help="label of GPU nodes: key or key=value"
    ),
    device_plugin_image: str = typer.Option(
        ElasticityInputs.device_plugin_image, help="NVIDIA device plugin image, with a pinned tag"
    ),
    dcgm_image: str = typer.Option(
        ElasticityInputs.dcgm_image, help="DCGM exporter image, with a pinned tag"
    ),
    out: Path | None = typer.Option(None, help="directory to write the files to (default: stdout)"),
) -> None:
    """Device plugin, DCGM exporter, Prometheus Adapter rules, HPA and PDB for a GPU Deployment."""
    pairs: list[tuple[str, str]] = []
    if selector:
        for item in selector.split(","):
            key, _, value = item.partition("=")
            pairs.append((key.strip(), value.strip()))
    inputs = ElasticityInputs(
        deployment=deployment,
        namespace=namespace,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_util=target_util,
        scale_up_window_s=scale_up_window,
        scale_down_window_s=scale_down_window,
        grace_period_s=grace_seconds,
        concurrency=concurrency,
        pod_selector=tuple(pairs),
        metric_name=metric_name,
        monitoring_namespace=monitoring_namespace,
        prometheus_url=prometheus_url,
        prometheus_port=prometheus_port,
        gpu_node_label=parse_label(gpu_node_label),
        device_plugin_image=device_plugin_image,
        dcgm_image=dcgm_image,
    )
    try:
        rendered = render_elasticity(inputs)
    except InvalidInput as error:
        raise _fail(error) from None
    for warning in rendered.warnings:
        _err.print(f"[yellow]warning[/yellow]: {warning}", highlight=False)
    _emit(rendered.files, out)


def register(app: typer.Typer) -> None:
    """Add `gke` and `elasticity` to the `render` Typer app."""
    app.command("gke")(gke)
    app.command("elasticity")(elasticity)
