"""`eops fn ...`: deploy, list, get and remove functions, through the Python client."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from elasticityops.cli import remote, render
from elasticityops.cli.help_screen import App
from elasticityops.client import spec_from
from elasticityops.wire import FunctionList

app = App(
    name="fn",
    help="Deploy, list, get and remove functions. " + remote.ENV_HELP,
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (the API's shape) instead of a table.")]


def deploy(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="Function spec, YAML or JSON (name, command, gpu, timeout_seconds, ...).",
            show_default=False,
        ),
    ],
    as_json: JsonFlag = False,
) -> None:
    """Create or replace the function declared in FILE.

    The file is validated here first, so a mistake is reported field by field (with the fix)
    before anything is sent.

    Its relative paths are relative to its directory: a spec with no `workdir` whose command
    names a file or directory there runs there (the local backend); a relative `workdir` is
    from there too.

    Deploying the same spec twice changes nothing and says so; a changed spec gets a new
    version."""
    with remote.connected() as client:
        spec = spec_from(file)
        item = client.deploy_function(spec)
    if as_json:
        remote.print_json(item.model_dump_json())
        return
    name = escape(item.spec.name)
    if item.changed:
        remote.out.print(f"deployed [bold]{name}[/], version {item.version}")
    else:
        remote.out.print(f"[bold]{name}[/] unchanged, version {item.version}: this spec is deployed already")
    remote.out.print(_where_it_runs(item.spec.workdir, file), markup=False, soft_wrap=True)
    if item.webhook_secret is not None:
        # Shown this once (a new webhook URL): the receiver verifies deliveries with it.
        remote.out.print(
            f"webhook signing secret (shown once, keep it for your receiver): {item.webhook_secret}",
            markup=False,
            soft_wrap=True,
        )


def _where_it_runs(workdir: str | None, file: Path) -> str:
    if workdir is None:
        return "no workdir: the local backend runs it in the gateway's working directory"
    whose = " (the spec file's directory)" if workdir == str(file.resolve().parent) else ""
    return f"workdir {workdir}{whose}: the local backend runs the command there"


def list_functions(as_json: JsonFlag = False) -> None:
    """List the deployed functions."""
    with remote.connected() as client:
        items = client.list_functions()
    if as_json:
        remote.print_json(FunctionList(items=items).model_dump_json())
    elif not items:
        remote.err.print("no functions yet: deploy one with `eops fn deploy FILE`")
    else:
        remote.out.print(render.functions_table(items))


def get_function(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Function name.", show_default=False)],
    as_json: JsonFlag = False,
) -> None:
    """Show one function: its version and its spec as YAML."""
    with remote.connected() as client:
        item = client.get_function(name)
    if as_json:
        remote.print_json(item.model_dump_json())
    else:
        remote.out.print(render.function_detail(item))


def remove_function(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Function name.", show_default=False)],
    force: Annotated[
        bool,
        typer.Option("--force", help="Also fail its queued invocations and cancel its running ones."),
    ] = False,
) -> None:
    """Remove a function. Refused while it has queued or running invocations, unless --force.

    Its finished invocations stay readable."""
    with remote.connected() as client:
        client.delete_function(name, force=force)
    remote.out.print(f"removed [bold]{name}[/]")


for _name, _command in (
    ("deploy", deploy),
    ("ls", list_functions),
    ("get", get_function),
    ("rm", remove_function),
):
    app.command(_name)(_command)
