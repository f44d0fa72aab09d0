"""The `eops` command line. `main.py` names each command's module, imported when that command
runs; `help_screen.py` draws every `--help`."""
