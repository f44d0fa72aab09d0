"""Typer options made from knob declarations (elasticityops/knobs.py): one option per knob, with
its environment variable and default (`--help` shows `[env var: EOPS_PORT]  [default: 8080]`,
help_screen.py), its unit as the metavar, and its help escaped so Rich shows it as written.

The decorated command receives `given`: knob name -> the value typed on the command line, raw.
Conversion, and reading the environment variables, is the loader's (`knobs.load`), so a value is
converted the same way wherever it comes from and a bad one is named by its flag or variable."""

from __future__ import annotations

import functools
import inspect
import keyword
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import typer
from rich.markup import escape

from elasticityops.knobs import Spec

Command = Callable[..., None]
_CTX = "knob_ctx"


def _option(knob: Spec, panel: str | None) -> inspect.Parameter:
    help_text = knob.help + (f" ({knob.limits})" if knob.limits else "")
    if knob.is_bool:
        decls = [knob.flag if knob.off_flag is None else f"{knob.flag}/{knob.off_flag}"]
        kind: Any = bool
        default: Any = bool(knob.default)
        metavar = None
    else:
        # Text on the command line: knobs.load converts it, as it does a variable or a YAML value.
        # The default is its text, for --help only: an option not typed is not in `given`.
        decls, kind, default, metavar = [knob.flag], str, knob.default_text, knob.metavar
    option = typer.Option(
        *decls,
        envvar=knob.env,
        show_envvar=knob.env is not None,
        show_default=True,
        metavar=metavar,
        help=escape(help_text),
        rich_help_panel=knob.about.get("panel", panel),
    )
    name = knob.name.replace("-", "_")
    return inspect.Parameter(
        name + "_" if keyword.iskeyword(name) else name,  # `--from` is no Python name
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, option],
    )


def knob_options(*groups: tuple[str | None, Sequence[Spec]]) -> Callable[[Command], Command]:
    """Add the knobs of each (help panel, knobs) group as options of the decorated command,
    after its own parameters; the command takes `given` (see the module docstring)."""

    def decorate(func: Command) -> Command:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "given"]
        added = [_option(k, panel) for panel, group in groups for k in group]
        names = {p.name: k.name for p, k in zip(added, [k for _, g in groups for k in g], strict=True)}
        ctx = next((p.name for p in own if p.annotation is typer.Context), None)
        extra = []
        if ctx is None:
            ctx = _CTX
            extra.append(inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> None:
            context: typer.Context = kwargs[ctx] if ctx != _CTX else kwargs.pop(_CTX)
            given: dict[str, Any] = {}
            for param, name in names.items():
                value = kwargs.pop(param)
                if getattr(context.get_parameter_source(param), "name", "") == "COMMANDLINE":
                    given[name] = value
            func(*args, **kwargs, given=given)

        params = [*own, *extra, *added]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate


def environ(knobs: Iterable[Spec]) -> dict[str, str]:
    """The environment variables of `knobs` that are set: what a command passes to `knobs.load`
    so that it reads exactly the variables its --help shows, and no other knob's."""
    return {k.env: os.environ[k.env] for k in knobs if k.env is not None and k.env in os.environ}
