"""`eops render`: print Kubernetes manifests as YAML that `kubectl apply -f -` takes.

One command per function: `job` (the Job one invocation of a function would create), `deploy`
(everything to run the gateway in a cluster) and `worker-rbac` (what each MultiKueue worker
grants the gateway). Other areas add theirs to `app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from elasticityops.backends.kubernetes.deploy import DEPLOY_KUBERNETES, DeployOptions, build_deploy
from elasticityops.backends.kubernetes.manifests import build_workload
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.worker_rbac import build_worker_rbac, kubeconfig_steps
from elasticityops.cli.help_screen import App
from elasticityops.cli.knob_options import environ, knob_options
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.domain.functions import load_function_text
from elasticityops.domain.invocations import Invocation, State, Timeline, new_invocation_id
from elasticityops.knobs import load, spec, specs

app = App(help="Print Kubernetes manifests (YAML for kubectl apply).", no_args_is_help=True)


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


# The Kubernetes backend's knobs that shape a Job (what build_job reads), and those of the gateway
# that `render deploy` writes into its environment: the backend's own declarations, so their flags
# and variables are those of `eops serve`.
JOB_KNOBS = [
    spec(KubernetesSettings, name)
    for name in (
        "namespace",
        "kube-instance",
        "kube-gpu-driver-version",
        "kube-image-pull-policy",
        "kube-job-service-account",
        "kube-ttl-after-finished-seconds",
        "kube-daemonset-cpu-millis",
        "kube-daemonset-memory-mib",
        "kube-workload",
    )
]
DEPLOY_KUBE = [k for k in specs(DeployOptions) if k.name in DEPLOY_KUBERNETES]
DEPLOY_OWN = [k for k in specs(DeployOptions) if not k.path.startswith("kubernetes.")]


@app.command("job")
@knob_options(("Kubernetes backend", JOB_KNOBS))
def job(
    given: dict[str, Any],
    function: Annotated[Path, typer.Argument(help="Function spec (YAML or JSON).")],
    invocation_id: Annotated[
        str | None, typer.Option(metavar="ID", help="Invocation id.", show_default="a new one")
    ] = None,
    callback_url: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Result callback URL given to the job.", show_default="none"),
    ] = None,
) -> None:
    """Print the Job (with --kube-workload pod, the bare Pod) that one invocation of FUNCTION
    would create."""
    try:
        if not function.is_file():
            raise InvalidInput(
                [FieldProblem("FUNCTION", f"{function} is not a file", "pass the path of a function YAML")]
            )
        function_spec = load_function_text(function.read_text(), source=str(function))
        settings = load(KubernetesSettings(), environ(JOB_KNOBS), given)
        inv = Invocation(
            id=invocation_id or new_invocation_id(),
            function=function_spec.name,
            state=State.pending,
            priority=function_spec.priority,
            timeline=Timeline(accepted=SystemClock().now()),
        )
        manifest = build_workload(function_spec, inv, settings, callback_url)
    except EopsError as exc:
        raise _fail(exc) from None
    typer.echo(dump_yaml([manifest]), nl=False)


@app.command("deploy")
@knob_options(("Gateway", DEPLOY_OWN), ("Kubernetes backend", DEPLOY_KUBE))
def deploy(given: dict[str, Any]) -> None:
    """Print everything `kubectl apply` needs to run ElasticityOps in a cluster."""
    try:
        objects = build_deploy(load(DeployOptions(), environ(DEPLOY_KUBE), given))
    except EopsError as exc:
        raise _fail(exc) from None
    typer.echo(dump_yaml(objects), nl=False)


WORKER_KNOBS = [spec(KubernetesSettings, "namespace")]


@app.command("worker-rbac")
@knob_options(("Kubernetes backend", WORKER_KNOBS))
def worker_rbac(given: dict[str, Any]) -> None:
    """Print what each MultiKueue worker cluster (--kube-workers) grants the gateway, to apply
    there: ServiceAccount, a Role with only the calls the gateway makes in a worker, its
    RoleBinding and a token Secret; stderr says how to make the kubeconfig from that token
    (docs/multi-cluster.md)."""
    try:
        settings = load(KubernetesSettings(), environ(WORKER_KNOBS), given)
        objects = build_worker_rbac(settings.namespace)
    except EopsError as exc:
        raise _fail(exc) from None
    typer.echo(dump_yaml(objects), nl=False)
    steps = "\n".join(f"  {line}" for line in kubeconfig_steps(settings.namespace))
    typer.echo(
        "then, with WORKER the worker's MultiKueueCluster name and WORKER_CONTEXT an admin's kubectl "
        f"context of it, write WORKER.kubeconfig for --kube-workers WORKER=WORKER.kubeconfig:\n{steps}",
        err=True,
    )


# The ops renders (`render gke`, `render elasticity`) live in render_ops.py (issue 6).
from elasticityops.cli.render_ops import register as _register_ops  # noqa: E402

_register_ops(app)
