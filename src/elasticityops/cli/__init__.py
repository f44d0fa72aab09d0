"""The `eops` command line. Each area registers its own Typer sub-app in `main.py`."""
