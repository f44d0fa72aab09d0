"""`eops render`: print Kubernetes manifests as YAML that `kubectl apply -f -` takes.

One command per function: `job` (the Job one invocation of a function would create) and
`deploy` (everything to run the gateway in a cluster). Other areas add theirs to `app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from elasticityops.backends.kubernetes.deploy import DeployOptions, build_deploy
from elasticityops.backends.kubernetes.manifests import build_job
from elasticityops.backends.kubernetes.settings import KubernetesSettings, check_settings
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.domain.functions import load_function_text
from elasticityops.domain.invocations import Invocation, State, Timeline, new_invocation_id

app = typer.Typer(help="Print Kubernetes manifests (YAML for kubectl apply).", no_args_is_help=True)


def _fail(exc: EopsError) -> typer.Exit:
    problems = exc.problems if isinstance(exc, InvalidInput) else []
    for line in [p.render() for p in problems] or [exc.message]:
        typer.secho(f"error: {line}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


class _PlainDumper(yaml.SafeDumper):
    """No anchors and aliases: kubectl takes them, but people reading the output should not
    have to resolve them."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML, keys in the order written (apiVersion, kind, metadata first)."""
    return "---\n".join(
        yaml.dump(obj, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False) for obj in objects
    )


@app.command("job")
def job(
    function: Annotated[Path, typer.Argument(help="Function spec (YAML or JSON).")],
    namespace: Annotated[str, typer.Option(help="Namespace of the Job.")] = "elasticityops",
    instance: Annotated[str, typer.Option(help="Gateway instance label.")] = "default",
    invocation_id: Annotated[str | None, typer.Option(help="Invocation id; default: a new one.")] = None,
    callback_url: Annotated[str | None, typer.Option(help="Result callback URL given to the job.")] = None,
    gpu_driver_version: Annotated[
        str | None, typer.Option(help="GKE driver selector: default or latest (node auto-provisioning).")
    ] = None,
) -> None:
    """Print the Job that one invocation of FUNCTION would create."""
    try:
        if not function.is_file():
            raise InvalidInput(
                [FieldProblem("FUNCTION", f"{function} is not a file", "pass the path of a function YAML")]
            )
        spec = load_function_text(function.read_text(), source=str(function))
        settings = KubernetesSettings(
            namespace=namespace, instance=instance, gpu_driver_version=gpu_driver_version
        )
        check_settings(settings)
        inv = Invocation(
            id=invocation_id or new_invocation_id(),
            function=spec.name,
            state=State.pending,
            priority=spec.priority,
            timeline=Timeline(accepted=SystemClock().now()),
        )
        manifest = build_job(spec, inv, settings, callback_url)
    except EopsError as exc:
        raise _fail(exc) from None
    typer.echo(dump_yaml([manifest]), nl=False)


@app.command("deploy")
def deploy(
    namespace: Annotated[str, typer.Option(help="Namespace of the gateway and its Jobs.")] = "elasticityops",
    image: Annotated[str, typer.Option(help="Container image of the gateway.")] = DeployOptions.image,
    instance: Annotated[str, typer.Option(help="Gateway instance label.")] = "default",
    gpu_budget: Annotated[
        int | None, typer.Option(help="The gateway's EOPS_GPU_BUDGET: most GPUs in use at once.", min=0)
    ] = None,
    gpu_driver_version: Annotated[
        str | None, typer.Option(help="GKE driver selector: default or latest (node auto-provisioning).")
    ] = None,
    storage: Annotated[str, typer.Option(help="Size of the gateway's data volume.")] = "1Gi",
    storage_class: Annotated[str | None, typer.Option(help="StorageClass of the data volume.")] = None,
) -> None:
    """Print everything `kubectl apply` needs to run ElasticityOps in a cluster."""
    try:
        check_settings(KubernetesSettings(namespace=namespace, gpu_driver_version=gpu_driver_version))
    except EopsError as exc:
        raise _fail(exc) from None
    options = DeployOptions(
        namespace=namespace,
        image=image,
        instance=instance,
        gpu_budget=gpu_budget,
        gpu_driver_version=gpu_driver_version,
        storage=storage,
        storage_class=storage_class,
    )
    typer.echo(dump_yaml(build_deploy(options)), nl=False)


# The ops renders (`render gke`, `render elasticity`) live in render_ops.py (issue 6).
from elasticityops.cli.render_ops import register as _register_ops  # noqa: E402

_register_ops(app)
