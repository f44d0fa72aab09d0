"""`eops serve` (gateway + dispatcher on embedded defaults) and `eops token create|ls|revoke`."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from elasticityops.cli.help_screen import App
from elasticityops.cli.knob_options import knob_options
from elasticityops.cli.shown import shown
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.domain.tokens import ApiToken, Scope, parse_lifetime
from elasticityops.knobs import Spec, spec, specs
from elasticityops.settings import Settings, load_settings

if TYPE_CHECKING:
    from elasticityops.store.sql import SqlStore as SqlStoreT
else:
    SqlStoreT = Any

T = TypeVar("T")

token_app = App(help="API tokens for the HTTP API.", no_args_is_help=True)

# Help panels of `eops serve --help`, by the knob's group (its path without the field name).
_PANELS = {
    "": "Gateway",
    "api": "API",
    "store": "Store",
    "dispatch": "Dispatcher",
    "local": "Local backend",
    "kubernetes": "Kubernetes backend",
    "headroom": "Warm capacity (headroom)",
    "leader": "High availability (leader election)",
    "replicas": "Replicas (several gateways on one database)",
    "session": "Web console (/ui): sessions",
    "feed": "Web console (/ui): live event streams",
    "history": "Web console (/ui): capacity chart",
    "webhooks": "Completion webhooks",
}


def _panel(group: str) -> tuple[str, list[Spec]]:
    return _PANELS[group], [k for k in specs(Settings) if k.path.rpartition(".")[0] == group]


def _where(name: str, given: dict[str, Any]) -> str:
    """How the user set the knob `name`: its flag if typed, else its variable."""
    knob = spec(Settings, name)
    return knob.flag if name in given or knob.env is None else knob.env


# The data dir's and database's locks (open descriptors), held for the life of `eops serve`.
_held_locks: list[int] = []


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound and listening on host:port, or exit 1 saying why (nothing started yet)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # now: on Linux two sockets merely bound to one port could both bind
    except OSError as exc:
        sock.close()
        busy = (
            " (another gateway or program uses it; choose another with --port)"
            if (exc.errno == errno.EADDRINUSE)
            else ""
        )
        typer.secho(
            f"error: cannot listen on {host}:{port}: {exc.strerror or exc}{busy}",
            err=True,
            fg=typer.colors.RED,
        )
        raise typer.Exit(1) from None
    return sock


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
    """Exit with the fix when the cluster lacks the namespace or the PriorityClasses every Job
    needs; a cluster that cannot be asked only gets a warning (the gateway retries it once
    serving)."""
    from elasticityops.backends.kubernetes.preflight import cluster_problems

    try:
        buffers = settings.headroom.enabled and settings.kubernetes.headroom_mechanism == "buffer"
        budget = settings.dispatch.gpu_budget
        typed = {kind for kind, _ in budget.per_type} if budget is not None else set()
        problems = asyncio.run(
            cluster_problems(settings.kubernetes, seconds=15.0, need_buffers=buffers, budget_types=typed)
        )
    except (EopsError, TimeoutError) as exc:
        detail = exc.message if isinstance(exc, EopsError) else "no answer within 15 s"
        what = "the cluster's namespace and PriorityClasses"
        typer.secho(f"warning: could not check {what}: {detail}", err=True)
        return
    for problem in problems:
        typer.secho(f"error: {problem}", err=True, fg=typer.colors.RED)
    if problems:
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
    from elasticityops.server.credentials import admin_token, server_secret
    from elasticityops.server.startup import deploy_files, open_store

    clock = SystemClock()
    store = await open_store(settings)
    try:
        await server_secret(store, settings.data_dir, clock)
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
            records = await deploy_files(store, files, clock)
            deployed = [r.spec.name for r in records]
        return token, created, deployed
    finally:
        await store.close()


def _backend_problems(settings: Settings, given: dict[str, Any]) -> list[FieldProblem]:
    """A kubeconfig that is not a file, a backend nobody registered: refused before anything starts."""
    from elasticityops.server import backends as backend_registry

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
    return problems


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _banner(settings: Settings, token: str, created: bool, deployed: list[str]) -> str:
    """Where the gateway listens and how to use it from the CLI."""
    shown_host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{shown_host}:{settings.port}"
    lines = [
        f"ElasticityOps gateway on {url} (backend {settings.backend}, data in {settings.data_dir})",
        f"  admin token {'created' if created else 'kept'} in {settings.data_dir / 'admin-token'}",
        "  to use the CLI:",
        f"  export EOPS_URL={settings.callback_base_url}",
        f"  export EOPS_TOKEN={token}",
    ]
    if not settings.api.metrics_token and settings.host not in _LOOPBACK:
        lines.append(
            "  /metrics (cost by function) is open to whoever reaches this address: "
            "set EOPS_METRICS_TOKEN (--metrics-token) to have it ask for a token"
        )
    if deployed:
        first = "hello" if "hello" in deployed else deployed[0]
        lines.append(f"  deployed: {', '.join(deployed)} (try: eops invoke {first} --wait)")
    return "\n".join(lines)


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
    problems = _backend_problems(settings, given)
    if problems:
        _fail(InvalidInput(problems))
    if settings.backend == "kubernetes":
        _check_cluster(settings)
    from elasticityops.server.data_dir import AlreadyRunning, data_dir_warning, lock_gateway

    # Start-up order: lock the data dir (and SQLite file), bind the port, and only then migrate,
    # adopt and announce, so a second gateway or a busy port fails before anything is done or said.
    try:
        _held_locks.extend(lock_gateway(settings))
    except AlreadyRunning as exc:
        typer.secho(f"error: {exc.message}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1) from None
    except EopsError as exc:
        _fail(exc)
    warning = data_dir_warning(settings.data_dir)
    if warning:
        typer.secho(warning, err=True, fg=typer.colors.YELLOW)
    listening = _listen(settings.host, settings.port)
    # With --port 0 the port is the one the kernel chose: the banner and callback URL say it.
    settings = replace(settings, port=listening.getsockname()[1])
    try:
        token, created, deployed = asyncio.run(_prepare(settings, example))
    except EopsError as exc:
        listening.close()
        _fail(exc)
        return
    import uvicorn

    from elasticityops.http_limits import MAX_HEAD_BYTES, LimitedHttpToolsProtocol
    from elasticityops.server.app import build_app
    from elasticityops.server.serving import GatewayServer

    print(_banner(settings, token, created, deployed), flush=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Alembic's runtime says "Context impl SQLiteImpl" on every start; the store's own
    # migrate module logs what was migrated, which is what an operator wants to read.
    logging.getLogger("alembic.runtime.migration").setLevel(max(logging.WARNING, logging.root.level))
    app = build_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=access_log,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # Caps on a request's line and headers, answered 431 before the app sees them.
        http=LimitedHttpToolsProtocol,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )
    # The store's writer thread and the event loop share the GIL; at the default 5 ms switch
    # interval a loop waiting for it stalls every request behind one batch's Python work.
    sys.setswitchinterval(0.0005)
    server = GatewayServer(config, app)
    server.run(sockets=[listening])
    if not server.started:
        sys.exit(1)


_TOKEN_DB = (None, [spec(Settings, "data-dir"), spec(Settings, "database-url")])


async def _on_store(settings: Settings, work: Callable[[SqlStoreT], Awaitable[T]], create: bool) -> T:
    from elasticityops.server.startup import open_store

    # A data dir with no database is a typo unless told otherwise: never start an empty one.
    store = await open_store(settings, create=create)
    try:
        return await work(store)
    finally:
        await store.close()


def _run_on_store(
    given: dict[str, Any], work: Callable[[SqlStoreT], Awaitable[T]], create: bool = False
) -> T:
    settings = _settings(given)
    try:
        return asyncio.run(_on_store(settings, work, create))
    except EopsError as exc:
        _fail(exc)
        raise  # unreachable: _fail exits


def _when(at: datetime | None) -> str:
    return "never" if at is None else at.strftime("%Y-%m-%d %H:%M:%SZ")


@token_app.command("create")
@knob_options(_TOKEN_DB)
def token_create(
    given: dict[str, Any],
    name: Annotated[str, typer.Option(help="A label for the token, kept with its hash.")] = "cli",
    scope: Annotated[
        Scope,
        typer.Option(help="admin: everything (deploy, delete, tokens); invoke: invoke, read, cancel."),
    ] = Scope.invoke,
    expires_in: Annotated[
        str | None,
        typer.Option("--expires-in", metavar="DURATION", help="Stop working after this long: 30d, 12h, 90m."),
    ] = None,
    create_database: Annotated[
        bool,
        typer.Option("--create", help="Make the database if the data dir has none (else that is refused)."),
    ] = False,
) -> None:
    """Create an API token and print it on stdout (only its hash is stored: keep it); its id,
    for `eops token revoke`, goes to stderr."""
    try:
        lifetime = None if expires_in is None else parse_lifetime(expires_in, "--expires-in")
    except EopsError as exc:
        _fail(exc)
        return

    async def create(store: SqlStoreT) -> tuple[str, ApiToken]:
        from elasticityops.api.auth import new_token

        return await new_token(store, name, SystemClock(), scope=scope, lifetime=lifetime)

    token, record = _run_on_store(given, create, create=create_database)
    print(token)
    typer.echo(
        f"token {record.id} ({record.name!r}, scope {record.scope.value}, expires "
        f"{_when(record.expires_at)}): shown once; revoke with `eops token revoke {record.id}`",
        err=True,
    )


@token_app.command("ls")
@knob_options(_TOKEN_DB)
def token_ls(
    given: dict[str, Any],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the API tokens of a data dir (never the tokens themselves: only their ids)."""

    async def listed(store: SqlStoreT) -> list[ApiToken]:
        return await store.list_api_tokens()

    tokens = _run_on_store(given, listed)
    now = SystemClock().now()
    if as_json:
        rows = [
            {
                "id": t.id,
                "name": t.name,
                "scope": t.scope.value,
                "created_at": t.created_at.isoformat(),
                "expires_at": None if t.expires_at is None else t.expires_at.isoformat(),
                "expired": t.expired(now),
            }
            for t in tokens
        ]
        print(json.dumps(rows, indent=2))
        return
    table = [("ID", "NAME", "SCOPE", "CREATED", "EXPIRES")]
    for t in tokens:
        expires = _when(t.expires_at) + (" (expired)" if t.expired(now) else "")
        table.append((t.id, shown(t.name), t.scope.value, _when(t.created_at), expires))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@token_app.command("revoke")
@knob_options(_TOKEN_DB)
def token_revoke(
    given: dict[str, Any],
    token_id: Annotated[
        str, typer.Argument(metavar="ID", help="The token's id (tok-...), from `eops token ls`.")
    ],
) -> None:
    """Revoke an API token: it stops working at once for new gateway processes, and within
    a few seconds for those running (they trust a token they have checked for 5 s)."""

    async def revoke(store: SqlStoreT) -> bool:
        return await store.revoke_api_token(token_id)

    if not _run_on_store(given, revoke):
        typer.secho(
            f"error: no token {token_id!r} in this database; list them with `eops token ls`",
            err=True,
            fg=typer.colors.RED,
        )
        raise typer.Exit(1)
    typer.echo(f"revoked {token_id}", err=True)


app = App()
app.command("serve")(serve)
app.add_typer(token_app, name="token")
