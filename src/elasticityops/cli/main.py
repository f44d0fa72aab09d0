"""Entry point of `eops`: one root Typer app; each area adds its commands here, one line each."""

from __future__ import annotations

import os
import sys

import typer

app = typer.Typer(
    name="eops",
    help="ElasticityOps: run GPU functions like Lambda, on Kubernetes or on one machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Imported here, not at module top, so `eops --help` stays fast and one area's import
    # error names that area instead of breaking the whole CLI silently.
    from elasticityops.cli import functions, invocations

    app.add_typer(functions.app, name="fn")
    invocations.register(app)
    from elasticityops.cli import cost

    cost.register(app)
    from elasticityops.cli import serve

    serve.register(app)
    from elasticityops.cli.plan import app as plan_app

    app.add_typer(plan_app, name="plan")

    from elasticityops.cli.devcluster import app as devcluster_app

    app.add_typer(devcluster_app, name="dev-cluster")

    from elasticityops.cli import ops

    ops.register(app)

    from elasticityops.cli.render_app import app as render_app

    app.add_typer(render_app, name="render")

    from elasticityops.cli import rehearse

    rehearse.register(app)


_register()


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
