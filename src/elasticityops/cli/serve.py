"""`eops serve` (gateway + dispatcher on embedded defaults) and `eops token create`."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.settings import Settings, load_settings

token_app = typer.Typer(help="API tokens for the HTTP API.", no_args_is_help=True)

DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="Database, server secret and admin token. [env: EOPS_DATA_DIR; default ~/.eops]"
    ),
]


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


def _settings(overrides: dict[str, Any]) -> Settings:
    try:
        return load_settings(overrides=overrides)
    except EopsError as exc:
        _fail(exc)
        raise  # unreachable: _fail exits


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


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on. [env: EOPS_HOST; default 127.0.0.1]")
    ] = None,
    port: Annotated[int | None, typer.Option(help="TCP port. [env: EOPS_PORT; default 8080]")] = None,
    data_dir: DataDirOpt = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            help="GPU slots of the local backend. [env: EOPS_GPUS; default: one per NVIDIA GPU, "
            "else 2 virtual]",
            min=1,
        ),
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="local or kubernetes. [env: EOPS_BACKEND; default local]")
    ] = None,
    example: Annotated[
        bool, typer.Option("--example", help="Deploy the functions in examples/ first.")
    ] = False,
    max_payload_bytes: Annotated[
        int | None,
        typer.Option(help="Largest request body. [env: EOPS_MAX_PAYLOAD_BYTES; default 1 MiB]", min=1),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="postgresql+psycopg://... instead of SQLite in the data dir. [env: EOPS_DATABASE_URL]"
        ),
    ] = None,
    paused: Annotated[
        bool | None,
        typer.Option(
            "--paused/--no-paused", help="Accept invocations but admit none. [env: EOPS_DISPATCH_PAUSED]"
        ),
    ] = None,
    access_log: Annotated[bool, typer.Option("--access-log", help="Log every request.")] = False,
    # Kubernetes backend (issue 4)
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="Kubeconfig of the cluster (kubernetes backend). [env: EOPS_KUBECONFIG; default "
            "$KUBECONFIG, ~/.kube/config, else in-cluster]"
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            help="Namespace of the Jobs (kubernetes backend). [env: EOPS_KUBE_NAMESPACE; "
            "default elasticityops]"
        ),
    ] = None,
) -> None:
    """Run the gateway and the dispatcher; print the URL and an admin token."""
    settings = _settings(
        {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "backend": backend,
            "local.gpus": gpus,
            "api.max_payload_bytes": max_payload_bytes,
            "store.url": database_url,
            "dispatch.paused": paused,
            "kubernetes.kubeconfig": str(kubeconfig) if kubeconfig else None,
            "kubernetes.namespace": namespace,
        }
    )
    if kubeconfig is not None and not kubeconfig.is_file():  # kubernetes backend (issue 4)
        _fail(
            InvalidInput(
                [FieldProblem("--kubeconfig", f"{kubeconfig} is not a file", "pass a kubeconfig file")]
            )
        )
    from elasticityops import backend_registry

    if settings.backend not in backend_registry.names():
        _fail(
            InvalidInput(
                [
                    FieldProblem(
                        "--backend",
                        f"unknown backend {settings.backend!r}",
                        f"use one of: {', '.join(backend_registry.names())}",
                    )
                ]
            )
        )
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
def token_create(
    data_dir: DataDirOpt = None,
    name: Annotated[str, typer.Option(help="A label for the token, kept with its hash.")] = "cli",
    database_url: Annotated[
        str | None,
        typer.Option(help="The gateway's database, if not SQLite in the data dir. [env: EOPS_DATABASE_URL]"),
    ] = None,
) -> None:
    """Create an API token and print it (only its hash is stored: keep it)."""
    settings = _settings({"data_dir": data_dir, "store.url": database_url})

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
