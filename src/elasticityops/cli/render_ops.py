"""`eops render gke`, `elasticity`, `kueue` and `chart`: the ops renders, added to the `render` Typer
app with `register(app)`. The renders are pure; these commands only write files or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from elasticityops.backends.kubernetes.worker_clusters import parse_workers, unreadable
from elasticityops.cli.knob_options import environ, knob_options
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import load, specs
from elasticityops.ops.chart import differences, render_chart
from elasticityops.ops.elasticity.inputs import ElasticityInputs
from elasticityops.ops.elasticity.render import render_elasticity
from elasticityops.ops.gke.inputs import GkeInputs, expand_zones
from elasticityops.ops.gke.render import render_gke
from elasticityops.ops.kueue import KueueInputs, render_kueue
from elasticityops.ops.kueue_multikueue import render_manager

_err = Console(stderr=True)


def _fail(error: InvalidInput) -> typer.Exit:
    for problem in error.problems:
        # The renders' own checks name a flag without its dashes; knobs.load names it with them.
        flag = problem.field if problem.field.startswith("-") else f"--{problem.field}"
        _err.print(
            f"[red]{flag}[/red]: {escape(problem.problem)}"
            + (f"; {escape(problem.fix)}" if problem.fix else ""),
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


_GKE = specs(GkeInputs)
_ELASTICITY = specs(ElasticityInputs)
_KUEUE = specs(KueueInputs)
Out = Annotated[
    Path | None, typer.Option(metavar="DIR", help="Directory to write the files to.", show_default="stdout")
]


@knob_options(("Sizing and machines", _GKE))
def gke(
    given: dict[str, Any],
    project: Annotated[str, typer.Option(help="GCP project id.")],
    region: Annotated[str, typer.Option(help="GCP region, e.g. us-central1.")],
    zones: Annotated[str, typer.Option(help="Zones with the GPU: a,b,c or full names.")],
    peak: Annotated[
        int, typer.Option(metavar="NODES", help="The most GPU nodes (one GPU each) running at once.")
    ],
    out: Out = None,
) -> None:
    """A reviewed gcloud script and manifests for a GKE cluster sized for the peak."""
    try:
        base = GkeInputs(
            project=project, region=region, zones=expand_zones(region, zones.split(",")), peak=peak
        )
        rendered = render_gke(load(base, environ(_GKE), given))
    except InvalidInput as error:
        raise _fail(error) from None
    for warning in rendered.warnings:
        _err.print(f"[yellow]warning[/yellow]: {warning}", highlight=False)
    _emit(rendered.files, out, executable=("create-cluster.sh",))


@knob_options(("Scaling and monitoring", _ELASTICITY))
def elasticity(
    given: dict[str, Any],
    deployment: Annotated[str, typer.Option(metavar="NAME", help="The GPU Deployment to scale.")],
    out: Out = None,
) -> None:
    """Device plugin, DCGM exporter, Prometheus Adapter rules, HPA and PDB for a GPU Deployment."""
    try:
        inputs = load(ElasticityInputs(deployment=deployment), environ(_ELASTICITY), given)
        rendered = render_elasticity(inputs)
    except InvalidInput as error:
        raise _fail(error) from None
    for warning in rendered.warnings:
        _err.print(f"[yellow]warning[/yellow]: {warning}", highlight=False)
    _emit(rendered.files, out)


@knob_options(("Queues and capacity", _KUEUE))
def kueue(
    given: dict[str, Any],
    gpu_budget: Annotated[
        str,
        typer.Option(
            help="GPU quota per type, in eops serve's syntax: TYPE=N[,TYPE=N] (e.g. nvidia-tesla-t4=8).",
        ),
    ],
    multikueue: Annotated[
        str | None,
        typer.Option(
            metavar="WORKER=KUBECONFIG,...",
            help="Render a MultiKueue manager's objects instead: each worker's kubeconfig Secret, "
            "MultiKueueCluster and config, and the queue gated by MultiKueue's check (no capacity "
            "check: that is each worker's own, rendered without this flag). docs/multi-cluster.md.",
        ),
    ] = None,
    out: Out = None,
) -> None:
    """ResourceFlavors, a ClusterQueue holding the GPU quota, the LocalQueue, WorkloadPriorityClasses
    and the ProvisioningRequest admission check, for `kubectl apply -f -`; with --multikueue, a
    MultiKueue manager's."""
    try:
        inputs = load(KueueInputs(gpu_budget=gpu_budget), environ(_KUEUE), given)
        rendered = render_kueue(inputs) if multikueue is None else _manager(inputs, multikueue, given)
    except InvalidInput as error:
        raise _fail(error) from None
    if out is None:
        [text] = rendered.values()
        typer.echo(text.rstrip("\n"))
        return
    _emit(rendered, out)


def _manager(inputs: KueueInputs, workers: str, given: dict[str, Any]) -> dict[str, str]:
    """A MultiKueue manager's objects, the workers' kubeconfigs read from their files."""
    named, problems = parse_workers(workers, flag="multikueue")
    problems += unreadable(named, flag="multikueue")
    if "provisioning-class" in given:
        problems.append(
            FieldProblem(
                "provisioning-class",
                "a capacity check belongs on the workers, where the nodes are",
                "drop it with --multikueue; render each worker's queue with it, without --multikueue",
            )
        )
    if problems:
        raise InvalidInput(problems)
    kubeconfigs = {name: Path(path).read_text(errors="replace") for name, path in named.items()}
    return render_manager(inputs, kubeconfigs)


def chart(
    out: Annotated[Path, typer.Option(metavar="DIR", help="The chart's directory.")] = Path(
        "charts/elasticityops"
    ),
    check: Annotated[
        bool, typer.Option(help="Write nothing; exit 1 if the directory is not what would be written.")
    ] = False,
) -> None:
    """The Helm chart of the gateway, from the same template as `render deploy` (docs/helm.md)."""
    files = render_chart()
    found = {
        str(path.relative_to(out)): path.read_text(encoding="utf-8")
        for path in (sorted(out.rglob("*")) if out.is_dir() else [])
        if path.is_file()
    }
    if check:
        stale = differences(files, found)
        for path in stale:
            _err.print(
                f"[red]{out / path}[/red]: not what `eops render chart` writes",
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(1 if stale else 0)
    for path in found.keys() - files.keys():
        (out / path).unlink()  # a file of an earlier chart (a kind no longer rendered)
    for path in files:
        (out / path).parent.mkdir(parents=True, exist_ok=True)
    _emit(files, out)


def register(app: typer.Typer) -> None:
    """Add `gke`, `elasticity`, `kueue` and `chart` to the `render` Typer app."""
    app.command("gke")(gke)
    app.command("elasticity")(elasticity)
    app.command("kueue")(kueue)
    app.command("chart")(chart)
