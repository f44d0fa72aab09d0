"""Every command's `--help` as a user reads it (issue 38): at 80 columns each flag and environment
variable whole, metavars in one style (an UPPERCASE word, none for a flag), help text reflowed
rather than broken where the source breaks its lines, and nothing that only the project's own
history means. And what `eops` imports to start: none of the server's, the planner's or the
Kubernetes client's libraries for `--help`, none of the server's for a client command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.cells import cell_len
from typer.testing import CliRunner

from elasticityops.cli.main import app

runner = CliRunner()


def _walk(command: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            found += _walk(command.get_command(ctx, name), (*path, name))
    return found


COMMANDS = _walk(typer.main.get_command(app), ())
GROUPS = [(path, command) for path, command in COMMANDS if hasattr(command, "list_commands")]


def _ids(found: list[tuple[tuple[str, ...], Any]]) -> list[str]:
    return [" ".join(("eops", *path)) for path, _ in found]


def _help(path: tuple[str, ...], columns: int) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids(COMMANDS))
def test_at_80_columns_every_flag_and_variable_is_whole(path: tuple[str, ...], command: Any) -> None:
    text = _help(path, 80)
    assert "…" not in text, "something cut short"
    assert max(cell_len(line) for line in text.splitlines()) <= 80
    for param in _options(command):
        for flag in (*param.opts, *param.secondary_opts):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), flag
        if param.show_envvar and param.envvar:
            assert f"[env var: {param.envvar}]" in text


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids(COMMANDS))
def test_one_metavar_style_and_none_for_a_flag(path: tuple[str, ...], command: Any) -> None:
    text = _help(path, 200)
    assert not re.search(r"<(bool|str|int|float|path|list)\b", text), "a Python type as metavar"
    for param in _options(command):
        after = re.search(rf"^│ {re.escape(', '.join(param.opts))}(?![\w-])(?: (\S+))?", text, re.M)
        assert after, param.opts
        if param.is_flag:
            assert after.group(1) is None, f"{param.opts} is a flag: {after.group(1)}"
        else:
            assert after.group(1) is not None, f"{param.opts} shows no metavar"
            assert after.group(1) == after.group(1).upper(), f"{param.opts}: {after.group(1)}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids(COMMANDS))
def test_help_text_is_reflowed_not_broken_where_the_source_breaks(
    path: tuple[str, ...], command: Any
) -> None:
    """Wide enough for any paragraph: each is one line, however its docstring was wrapped."""
    lines = [line.strip(" │") for line in _help(path, 400).splitlines()]
    for paragraph in (command.help or "").split("\n\n"):
        flat = " ".join(paragraph.split())
        if flat:
            assert flat in lines, flat


@pytest.mark.parametrize(("path", "command"), GROUPS, ids=_ids(GROUPS))
def test_a_group_lists_each_command_on_one_line(path: tuple[str, ...], command: Any) -> None:
    text = _help(path, 400)
    ctx = typer.Context(command)
    for name in command.list_commands(ctx):
        assert re.search(rf"^│ {re.escape(name)} +\S", text, re.M), name
    assert not re.search(r"^│ {3,}\S", text, re.M), "a listing's text broken over lines"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids(COMMANDS))
def test_no_internal_references_in_help(path: tuple[str, ...], command: Any) -> None:
    text = _help(path, 400)
    assert not re.search(r"\bissue \d+", text)
    assert not re.search(r"\b\w+/[\w/]*\.py\b", text), "a source file named"


def _imported_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {name.partition(".")[0] for name in done.stdout.split()}


SERVER_SIDE = {"sqlalchemy", "alembic", "fastapi", "starlette", "uvicorn"}
TOOLS = {"matplotlib", "numpy", "aiohttp", "lightkube", "msgspec"}


def test_eops_help_imports_no_heavy_library() -> None:
    """What `eops --help` loads: the root command and its help screen, no command's module."""
    heavy = SERVER_SIDE | TOOLS | {"httpx", "pydantic", "yaml"}
    code = "from elasticityops.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass"
    assert _imported_after(code) & heavy == set()


def test_client_commands_import_nothing_of_the_server_or_the_planner() -> None:
    """What `eops fn ls` and `eops status ID` load: the client, not the gateway or the planner."""
    code = (
        "import typer\nfrom elasticityops.cli.main import app\n"
        "root = typer.main.get_command(app)\nctx = typer.Context(root)\n"
        "root.get_command(ctx, 'fn')\nroot.get_command(ctx, 'status')"
    )
    assert _imported_after(code) & (SERVER_SIDE | TOOLS) == set()


def test_a_plan_run_without_plots_imports_no_matplotlib(tmp_path: Path) -> None:
    """`eops plan run --no-plots` writes its files without loading matplotlib (~0.4 s of import,
    a fifth of a run on a 300k-request trace)."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,duration_s\n0,30\n5,30\n")
    args = ["plan", "run", "--trace", str(trace), "--no-plots", "--out", str(tmp_path / "o")]
    code = (
        "from elasticityops.cli.main import app\ntry:\n"
        f"    app({args!r})\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code"
    )
    assert "matplotlib" not in _imported_after(code)
    assert (tmp_path / "o" / "summary.json").exists()
