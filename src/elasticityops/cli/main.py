"""Entry point of `eops`: one root command whose commands load when they are used. The table below
names each command's module, help panel and one-line summary, so `eops --help` lists them all
without importing one, and `eops status ID` imports what `status` needs and nothing else
(bench/cli_startup.py measures it, BENCHMARKS.md "CLI start-up")."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

import typer

from elasticityops.cli.help_screen import App, Group


@dataclass(frozen=True)
class Area:
    module: str
    """elasticityops.cli.MODULE, whose Typer `app` holds the command."""
    panel: str
    summary: str
    """What `eops --help` says of the command: one line."""
    whole: bool = False
    """The module's `app` is the command itself (a group: `eops fn ...`)."""


_USE = "Functions and invocations"
_RUN = "Gateway"
_PLAN = "Capacity planning"
_CLUSTER = "Clusters"

COMMANDS = {
    "invoke": Area("invocations", _USE, "Invoke a function with a JSON payload; --wait follows it."),
    "status": Area("invocations", _USE, "Show an invocation: its state, where its time went, its result."),
    "logs": Area("invocations", _USE, "Print an invocation's output; --follow until it ends."),
    "cancel": Area("invocations", _USE, "Cancel an invocation, queued or running."),
    "ls": Area("invocations", _USE, "List invocations, newest first."),
    "batch": Area("batches", _USE, "Show or cancel a batch of invocations.", whole=True),
    "fn": Area("functions", _USE, "Deploy, list, show and remove functions.", whole=True),
    "serve": Area("serve", _RUN, "Run the gateway and its dispatcher."),
    "token": Area("serve", _RUN, "Create, list and revoke API tokens."),
    "headroom": Area("invocations", _RUN, "Show the warm GPU capacity the gateway keeps."),
    "cost": Area("cost", _RUN, "Node time by phase, and what it cost."),
    "plan": Area("plan", _PLAN, "Replay a trace through a model of GPU node provisioning.", whole=True),
    "rehearse": Area("rehearse", _PLAN, "Replay a trace through the gateway on a real cluster."),
    "doctor": Area("ops", _CLUSTER, "Check a cluster for what GPU elasticity needs."),
    "render": Area("render_app", _CLUSTER, "Print Kubernetes manifests and a GKE set-up.", whole=True),
    "dev-cluster": Area(
        "devcluster", _CLUSTER, "A local control plane with simulated GPU nodes.", whole=True
    ),
}


def load(name: str) -> Any:
    """The click command `eops NAME`, its module imported now."""
    area = COMMANDS[name]
    module = importlib.import_module(f"elasticityops.cli.{area.module}")
    if area.whole:
        return typer.main.get_command(module.app)
    return typer.main.get_group(module.app).commands[name]


class _Root(Group):
    """Loads a command when it is looked up; lists them all from COMMANDS."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load(cmd_name)
        return self.commands.get(cmd_name)

    def listing(self, ctx: Any) -> list[tuple[str, str | None, str]]:
        return [(name, area.panel, area.summary) for name, area in COMMANDS.items()]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # Typer suggests from the commands loaded so far, which here is none of them.
        if args and args[0] not in COMMANDS and not args[0].startswith("-"):
            import difflib

            close = difflib.get_close_matches(args[0], list(COMMANDS))
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {args[0]!r}.{hint}")
        return super().resolve_command(ctx, args)


app = App(name="eops", cls=_Root, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _root() -> None:
    """ElasticityOps: run GPU functions like Lambda, on Kubernetes or on one machine."""


def main() -> None:
    """`eops`: an exception no command turned into a message is a bug; it is still said in one
    line (the traceback with EOPS_DEBUG=1), never dumped on the user."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("EOPS_DEBUG"):
            raise
        print(
            f"error: eops hit a bug ({type(exc).__name__}: {exc}); run it again with EOPS_DEBUG=1 "
            "for the traceback, and please report it",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
