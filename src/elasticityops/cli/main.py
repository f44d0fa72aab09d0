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
    pass


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
