"""Entry point of `eops`: one root Typer app; each area adds its commands here, one line each."""

from __future__ import annotations

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


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
