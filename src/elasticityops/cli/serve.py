"""`eops serve` (gateway + dispatcher on embedded defaults) and `eops token create`."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from elasticityops.cli.knob_options import knob_options
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.knobs import Spec, spec, specs
from elasticityops.settings import Settings, load_settings

token_app = typer.Typer(help="API tokens for the HTTP API.", no_args_is_help=True)

# Help panels of `eops serve --help`, by the knob's group (its path without the field name).
_PANELS = {
    "": "Gateway",
    "api": "API",
    "store": "Store",
    "dispatch": "Dispatcher",
    "local": "Local backend",
    "kubernetes": "Kubernetes backend",
}


def _panel(group: str) -> tuple[str, list[Spec]]:
    return _PANELS[group], [k for k in specs(Settings) if k.path.rpartition(".")[0] == group]


def _where(name: str, given: dict[str, Any]) -> str:
    """How the user set the knob `name`: its flag if typed, else its variable."""
    knob = spec(Settings, name)
    return knob.flag if name in given or knob.env is None else knob.env


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(token_app, name="token")


def _fail(exc: EopsError) -> None:
    if isinstance(exc, InvalidInput) and len(exc.problems) > 1:
        typer.secho("error: invalid settings", err=True, fg=typer.colors.RED)
        for problem in exc.problems:
            typer.echo(f"  {problem.render()}", err=True)
    else:
        typer.secho(f"error: {exc.message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(2)


def _settings(given: dict[str, Any]) -> Settings:
    try:
        return load_settings(given=given)
    except EopsError as exc:
        _fail(exc)
        raise  # unreachable: _fail exits


def _check_cluster(settings: Settings) -> None:
    """Exit with the fix when the cluster lacks the PriorityClasses every Job names; a cluster
    that cannot be asked only gets a warning (the gateway retries it once serving)."""
    from elasticityops.backends.kubernetes.preflight import check_priority_classes, missing_message

    try:
        missing = asyncio.run(check_priority_classes(settings.kubernetes, seconds=15.0))
    except (EopsError, TimeoutError) as exc:
        detail = exc.message if isinstance(exc, EopsError) else "no answer within 15 s"
        typer.secho(f"warning: could not check the cluster's PriorityClasses: {detail}", err=True)
        return
    if missing:
        typer.secho(f"error: {missing_message(missing)}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2)


def _example_files() -> list[Path]:
    """examples/*.yaml of the working directory, else of the source checkout this runs from."""
    for root in (Path.cwd() / "examples", Path(__file__).resolve().parents[3] / "examples"):
        files = sorted(root.glob("*.yaml"))
        if files:
            return files
    return []


async def _prepare(settings: Settings, example: bool) -> tuple[str, bool, list[str]]:
    # The server module pulls in FastAPI and SQLAlchemy: only the commands that need them pay.
    from elasticityops.server import admin_token, deploy_files, open_store, server_secret

    clock = SystemClock()
    server_secret(settings.data_dir)
    store = await open_store(settings)
    try:
        token, created = await admin_token(store, settings.data_dir, clock)
        deployed: list[str] = []
        if example:
            files = _example_files()
            if not files:
                raise InvalidInput(
                    [
                        FieldProblem(
                            "--example", "no examples/*.yaml found", "run eops serve from the checkout"
                        )
                    ]
                )
            deployed = [r.spec.name for r in await deploy_files(store, files, clock)]
        return token, created, deployed
    finally:
        await store.close()


@knob_options(*(_panel(group) for group in _PANELS))
def serve(
    given: dict[str, Any],
    example: Annotated[
        bool, typer.Option("--example", help="Deploy the functions in examples/ first.")
    ] = False,
    access_log: Annotated[bool, typer.Option("--access-log", help="Log every request.")] = False,
) -> None:
    """Run the gateway and the dispatcher; print the URL and an admin token. Every setting is a
    flag and an EOPS_* variable; a flag wins over its variable."""
    settings = _settings(given)
    from elasticityops import backend_registry

    kubeconfig = settings.kubernetes.kubeconfig
    problems = []
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        problems.append(
            FieldProblem(_where("kubeconfig", given), f"{kubeconfig} is not a file", "pass a kubeconfig file")
        )
    if settings.backend not in backend_registry.names():
        problems.append(
            FieldProblem(
                _where("backend", given),
                f"unknown backend {settings.backend!r}",
                f"use one of: {', '.join(backend_registry.names())}",
            )
        )
    if problems:
        _fail(InvalidInput(problems))
    if settings.backend == "kubernetes":
        _check_cluster(settings)
    try:
        token, created, deployed = asyncio.run(_prepare(settings, example))
    except EopsError as exc:
        _fail(exc)
        return
    import uvicorn

    from elasticityops.server import build_app

    url = f"http://{settings.host}:{settings.port}"
    lines = [
        f"ElasticityOps gateway on {url} (backend {settings.backend}, data in {settings.data_dir})",
        f"  admin token {'created' if created else 'kept'} in {settings.data_dir / 'admin-token'}",
        "  to use the CLI:",
        f"  export EOPS_URL={settings.callback_base_url}",
        f"  export EOPS_TOKEN={token}",
    ]
    if deployed:
        first = "hello" if "hello" in deployed else deployed[0]
        lines.append(f"  deployed: {', '.join(deployed)} (try: eops invoke {first} --wait)")
    print("\n".join(lines), flush=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = uvicorn.Config(
        build_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=access_log,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    # The store's writer thread and the event loop share the GIL; at the default 5 ms switch
    # interval a loop waiting for it stalls every request behind one batch's Python work.
    sys.setswitchinterval(0.0005)
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        sys.exit(1)


@token_app.command("create")
@knob_options((None, [spec(Settings, "data-dir"), spec(Settings, "database-url")]))
def token_create(
    given: dict[str, Any],
    name: Annotated[str, typer.Option(help="A label for the token, kept with its hash.")] = "cli",
) -> None:
    """Create an API token and print it (only its hash is stored: keep it)."""
    settings = _settings(given)

    async def create() -> str:
        from elasticityops.server import create_token, open_store

        store = await open_store(settings)
        try:
            return await create_token(store, name, SystemClock())
        finally:
            await store.close()

    try:
        token = asyncio.run(create())
    except EopsError as exc:
        _fail(exc)
        return
    print(token)
