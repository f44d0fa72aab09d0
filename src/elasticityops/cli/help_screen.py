"""The `--help` screen of every `eops` command: Typer's panels, laid out so that at any width each
flag, metavar and environment variable reads whole (never cut with "…").

An option panel is two columns, flags beside their help, where the widest flag and the widest
`[env var: ...]` both fit the width; else each option's help goes under its flags. Text is
reflowed (a docstring's line breaks are the source's, not the screen's); a metavar is one
UPPERCASE word, the option's own or its name's, and a flag has none.

`App` is `typer.Typer` with these screens for the app and each of its commands."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# Typer's colours: flags cyan, off-flags magenta, metavars yellow, the rest dim.
_FLAG, _OFF, _METAVAR, _DIM = "bold cyan", "bold magenta", "bold yellow", "dim"
_PANEL_WIDTH = 4  # a panel's border and padding, left and right
_GAP = 2  # between the flags and their help
_NARROWEST_HELP = 30  # flags beside help narrower than this: help goes under the flags
_INDENT = 4  # help under its flags
_FLAG_IN_TEXT = re.compile(r"(?<![\w-])--?[a-z][\w-]*")


def paragraphs(text: str | None) -> list[str]:
    """`text` (a docstring or help) as paragraphs, each one line: the terminal wraps them."""
    return [" ".join(block.split()) for block in inspect.cleandoc(text or "").split("\n\n") if block.strip()]


def summary(command: Any) -> str:
    """What a listing says of a command: its short help, else its help's first paragraph."""
    return command.short_help or next(iter(paragraphs(command.help)), "")


_Line = list[tuple[str, str]]  # (text, style) pieces of one line


@dataclass(frozen=True)
class _Row:
    flags: list[_Line]  # the flags and their metavar; then the off-flags, if any
    help: str  # Rich markup, one paragraph per line
    extras: list[str]  # [env var: ...], [default: ...], [required]: each kept on one line

    @property
    def flags_width(self) -> int:
        return max(sum(len(text) for text, _ in line) for line in self.flags)


def metavar(param: Any) -> str | None:
    """The option's value as help and usage show it: its metavar, else its name, upper case;
    None for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    shown: str = param.metavar or (param.name or "").upper()
    return shown


def _default(param: Any) -> str | None:
    if isinstance(param.show_default, str):
        return param.show_default
    value = param.default
    if not param.show_default or value is None or callable(value):
        return None
    if getattr(param, "is_flag", False):
        # A flag pair says which of its two flags holds when neither is typed.
        chosen = (param.opts if value else param.secondary_opts) if param.secondary_opts else []
        return chosen[0].lstrip("-") if chosen else None
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ", ".join(_one(v) for v in value) or None
    return _one(value)


def _one(value: Any) -> str:
    return str(value.value) if isinstance(value, Enum) else str(value)


def _limits(param: Any) -> str:
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        return f" ({low} to {high})"
    if low is not None or high is not None:
        return f" (>={low})" if high is None else f" (<={high})"
    return ""


def _row(param: Any) -> _Row:
    shown = metavar(param)
    if param.param_type_name == "argument":
        flags: list[_Line] = [[(shown or "", _METAVAR)]]
    else:
        flags = [[(", ".join(param.opts), _FLAG), *([(f" {shown}", _METAVAR)] if shown else [])]]
        if param.secondary_opts:
            flags.append([(", ".join(param.secondary_opts), _OFF)])
    envvar = param.envvar if getattr(param, "show_envvar", False) else None
    default = _default(param)
    extras = [
        *([f"[env var: {envvar}]"] if isinstance(envvar, str) else []),
        *([f"[default: {default}]"] if default is not None else []),
        *(["[required]"] if param.required else []),
    ]
    return _Row(flags, "\n".join(paragraphs(param.help)) + _limits(param), extras)


def _fits_beside(rows: Iterable[_Row], inner: int) -> tuple[bool, int]:
    """Whether flags fit beside their help (the widest flag, and each [env var: ...] or
    one-word default whole in what is left), and the flags column's width."""
    rows = list(rows)
    flags = max(r.flags_width for r in rows)
    unbroken = max((len(e) for r in rows for e in r.extras if " " not in e.partition(": ")[2]), default=0)
    return inner - flags - _GAP >= max(unbroken, _NARROWEST_HELP), flags


def _help_cell(console: Console, row: _Row, width: int) -> Text:
    """The help, then each extra after it on its last line if it fits there whole, else on a
    line of its own."""
    from rich.text import Text

    cell = _highlighted(Text.from_markup(row.help, overflow="fold"))
    used = cell.wrap(console, width)[-1].cell_len if row.help else 0
    for extra in row.extras:
        if used and used + _GAP + len(extra) <= width:
            cell.append(" " * _GAP)
            used += _GAP + len(extra)
        else:
            cell.append("\n" if used else "")
            used = len(extra)
        cell.append(extra, style=_DIM)
    return cell


def _highlighted(text: Text) -> Text:
    text.highlight_regex(_FLAG_IN_TEXT, _FLAG)
    return text


def _flags_cell(row: _Row) -> Text:
    from rich.text import Text

    cell = Text(no_wrap=True, overflow="fold")
    for k, line in enumerate(row.flags):
        if k:
            cell.append("\n")
        for text, style in line:
            cell.append(text, style=style)
    return cell


def _options_panel(console: Console, title: str, rows: list[_Row]) -> None:
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table

    inner = console.width - _PANEL_WIDTH
    beside, flags_width = _fits_beside(rows, inner)
    grid = Table.grid(padding=(0, _GAP, 0, 0), expand=True)
    if beside:
        grid.add_column(no_wrap=True, width=flags_width)
        grid.add_column(ratio=1)
        for row in rows:
            grid.add_row(_flags_cell(row), _help_cell(console, row, inner - flags_width - _GAP))
    else:
        grid.add_column(ratio=1)
        for row in rows:
            grid.add_row(_flags_cell(row))
            grid.add_row(Padding(_help_cell(console, row, inner - _INDENT), (0, 0, 0, _INDENT)))
    console.print(Panel(grid, title=title, title_align="left", border_style=_DIM))


def _commands_panel(console: Console, title: str, listed: list[tuple[str, str]], width: int) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, _GAP, 0, 0), expand=True)
    grid.add_column(no_wrap=True, width=width, style=_FLAG)
    grid.add_column(ratio=1)
    for name, text in listed:
        grid.add_row(name, Text.from_markup(text, overflow="fold"))
    console.print(Panel(grid, title=title, title_align="left", border_style=_DIM))


def _by_panel(items: Iterable[tuple[str | None, Any]], first: str) -> dict[str, list[Any]]:
    """Items grouped by their panel, in the order each panel first appears; `first` leads."""
    panels: dict[str, list[Any]] = {first: []}
    for panel, item in items:
        panels.setdefault(panel or first, []).append(item)
    return {title: found for title, found in panels.items() if found}


def show(command: Any, ctx: Any, listing: list[tuple[str, str | None, str]] | None = None) -> None:
    """Print `command`'s help screen; `listing` (name, panel, summary) for a group's commands."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Padding(Text(command.get_usage(ctx), style="bold"), 1))
    texts = paragraphs(command.help)
    if texts:
        body = Text.from_markup(texts[0])
        for more in texts[1:]:
            body.append("\n\n").append_text(Text.from_markup(more, style=_DIM))
        console.print(Padding(_highlighted(body), (0, 1, 1, 1)))
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [(None, _row(p)) for p in params if p.param_type_name == "argument"]
    options = [
        (getattr(p, "rich_help_panel", None), _row(p)) for p in params if p.param_type_name != "argument"
    ]
    for title, rows in (_by_panel(arguments, "Arguments") | _by_panel(options, "Options")).items():
        _options_panel(console, title, rows)
    listing = listing or []
    width = max((len(name) for name, _, _ in listing), default=0)  # one column across the panels
    for title, listed in _by_panel(
        ((panel, (name, text)) for name, panel, text in listing), "Commands"
    ).items():
        _commands_panel(console, title, listed, width)
    if command.epilog:
        console.print(Padding(Text.from_markup("\n\n".join(paragraphs(command.epilog))), 1))


class Command(TyperCommand):
    """A Typer command whose --help is this module's screen."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        show(self, ctx)


class Group(TyperGroup):
    """A Typer group whose --help is this module's screen, its commands listed by panel."""

    def listing(self, ctx: Any) -> list[tuple[str, str | None, str]]:
        """(name, panel, summary) of each command --help lists."""
        found = [(name, self.get_command(ctx, name)) for name in self.list_commands(ctx)]
        return [
            (name, getattr(cmd, "rich_help_panel", None), summary(cmd))
            for name, cmd in found
            if cmd is not None and not cmd.hidden
        ]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        show(self, ctx, self.listing(ctx))


class App(typer.Typer):
    """`typer.Typer` whose groups and commands show this module's help screen."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", Group)
        options.setdefault("add_completion", False)
        super().__init__(**options)

    def command(
        self, name: str | None = None, **options: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        options.setdefault("cls", Command)
        return super().command(name, **options)
