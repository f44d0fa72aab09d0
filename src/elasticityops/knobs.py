"""Settings declared once. A knob is a dataclass field made with `knob()`: its type is the field's
annotation, its default the field's default, and `knob()` states the rest (help, unit, environment
variable, flag, limits). Everything else is derived from that one declaration: reading `EOPS_*`
variables, typed conversion (pydantic, by the declared type), the limits check, the YAML keys of the
planner's config file, and the CLI options with their help (cli/knob_options.py).

Every numeric knob states its range, a bound below (`ge`/`gt`) and one above (`le`/`lt`), or
choices: `specs()` refuses a declaration without one, so no value read from a variable, a flag or
a file is unbounded (an absurd one, say a headroom of 10^20 units, once held a core for good).

A dataclass field that holds another dataclass groups that one's knobs under its name
(`Settings.store.read_threads` is the knob `store.read_threads`); a field made without `knob()` is
no knob (wiring such as the server secret, or a tuning constant nobody sets)."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeVar, Unpack

from elasticityops.domain.errors import FieldProblem, InvalidInput

T = TypeVar("T")
_META = "elasticityops.knob"


class About(TypedDict):
    """What `knob()` states besides the type and the default."""

    help: str
    """One sentence for --help; no default, unit or variable in it (those are added)."""
    env: NotRequired[str]
    """Environment variable (EOPS_*); none: flags and config files only."""
    flag: NotRequired[str]
    """Flag and YAML key without the dashes; default: the variable without EOPS_, else the field
    name, lower case with dashes."""
    off: NotRequired[str | None]
    """A bool knob's flag that turns it off; default: no-FLAG; None: there is none."""
    unit: NotRequired[str]
    """Unit of the value (seconds, bytes, GPUs); shown as the option's metavar."""
    metavar: NotRequired[str]
    """What the option's value looks like, when it is not a unit (DISTRIBUTION)."""
    shown: NotRequired[str]
    """How the default reads in --help when it is not a plain value (None, a computed path)."""
    ge: NotRequired[float]
    gt: NotRequired[float]
    le: NotRequired[float]
    lt: NotRequired[float]
    choices: NotRequired[tuple[str, ...]]
    parse: NotRequired[Callable[[Any], Any]]
    """Converter for a type pydantic does not know; raises ValueError with a message."""
    panel: NotRequired[str]
    """Help panel of the option, where it is not the one its command puts the group in."""


def knob(default: T, **about: Unpack[About]) -> T:
    """A dataclass field that is a knob (see the module docstring)."""
    result: T = field(default=default, metadata={_META: about})
    return result


def knob_factory(factory: Callable[[], T], **about: Unpack[About]) -> T:
    """`knob()` for a default made when the dataclass is built (state it with `shown`)."""
    result: T = field(default_factory=factory, metadata={_META: about})
    return result


class BadValue(ValueError):
    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text", Path: "a path"}
_METAVARS = {bool: "BOOLEAN", int: "INTEGER", float: "NUMBER", str: "TEXT", Path: "PATH"}


@dataclass(frozen=True)
class Spec:
    """One knob as found on its dataclass: dotted path, declared type, default, and `About`."""

    path: str
    kind: Any
    default: Any
    about: About

    @property
    def name(self) -> str:
        """The flag without dashes; also the YAML key and the key of `given` values."""
        if "flag" in self.about:
            return self.about["flag"]
        if "env" in self.about:
            return self.about["env"].removeprefix("EOPS_").lower().replace("_", "-")
        return self.path.rpartition(".")[2].replace("_", "-")

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def env(self) -> str | None:
        return self.about.get("env")

    @property
    def help(self) -> str:
        return self.about["help"]

    @property
    def base(self) -> Any:
        """The declared type without `| None`."""
        args = [a for a in typing.get_args(self.kind) if a is not types.NoneType]
        return args[0] if isinstance(self.kind, types.UnionType) and len(args) == 1 else self.kind

    @property
    def optional(self) -> bool:
        return types.NoneType in typing.get_args(self.kind)

    @property
    def is_bool(self) -> bool:
        return self.base is bool

    @property
    def off_flag(self) -> str | None:
        off = self.about.get("off", "")
        if off is None:
            return None
        return f"--{off or 'no-' + self.name}"

    @property
    def metavar(self) -> str:
        if "unit" in self.about:
            return self.about["unit"].upper()
        return self.about.get("metavar") or _METAVARS.get(self.base, "TEXT")

    @property
    def default_text(self) -> str:
        if "shown" in self.about:
            return self.about["shown"]
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    @property
    def is_numeric(self) -> bool:
        return self.base in (int, float) and "parse" not in self.about

    @property
    def limits(self) -> str:
        """`1 to 65535`, `>0, <=720`, `one of: a, b`; empty when there are none."""
        if "choices" in self.about:
            return "one of: " + ", ".join(self.about["choices"])
        about = self.about
        if "ge" in about and "le" in about:
            return f"{_number(about['ge'])} to {_number(about['le'])}"
        bounds: list[tuple[str, float | None]] = [
            (">=", about.get("ge")),
            (">", about.get("gt")),
            ("<=", about.get("le")),
            ("<", about.get("lt")),
        ]
        return ", ".join(f"{op}{_number(bound)}" for op, bound in bounds if bound is not None)

    def expected(self) -> str:
        """What a good value is, in words: `a whole number 1 to 65535`, `one of: a, b`."""
        if "choices" in self.about:
            return self.limits
        words = _WORDS.get(self.base, f"a {self.metavar.lower()}")
        return f"{words} {self.limits}".strip()

    def parse(self, raw: Any) -> Any:
        """`raw` (text from a variable or flag, or a YAML value) as the declared type, limits
        checked; a bad one raises BadValue."""
        if raw is None or (raw == "" and self.optional):
            value: Any = None
        elif "parse" in self.about:
            try:
                value = self.about["parse"](raw)
            except ValueError as exc:
                raise BadValue(str(exc).removeprefix(f"{self.flag}: "), "") from None
        else:
            value = self._convert(raw)
        try:
            self.check(value)
        except BadValue as bad:
            raise BadValue(f"invalid value {raw!r}", bad.fix) from None
        return value

    def _convert(self, raw: Any) -> Any:
        from pydantic import ValidationError

        bad = BadValue(f"invalid value {raw!r}", self.fix)
        if isinstance(raw, bool) and not self.is_bool:
            raise bad
        if self.base is str and isinstance(raw, int | float):
            raw = str(raw)  # YAML read `8080` as a number
        try:
            value = _adapter(self.kind).validate_python(raw.strip() if isinstance(raw, str) else raw)
        except ValidationError:
            raise bad from None
        if isinstance(value, float) and not math.isfinite(value):
            raise bad
        return value.expanduser() if isinstance(value, Path) else value

    def check(self, value: Any) -> None:
        """Raise BadValue if `value` (already typed) is outside the declared limits."""
        if value is None:
            return
        about = self.about
        ok = (
            ("choices" not in about or value in about["choices"])
            and ("ge" not in about or value >= about["ge"])
            and ("gt" not in about or value > about["gt"])
            and ("le" not in about or value <= about["le"])
            and ("lt" not in about or value < about["lt"])
        )
        if not ok:
            raise BadValue(f"invalid value {value!r}", self.fix)

    @property
    def fix(self) -> str:
        return f"use {self.expected()} (default: {self.default_text})"


def _number(bound: float) -> str:
    """A bound as written: 67108864, not 6.71089e+07; 0.5 as 0.5."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _ranged(knob_spec: Spec) -> Spec:
    """`knob_spec`, unless it is a numeric knob declared without a range (a TypeError naming it)."""
    about = knob_spec.about
    below = "ge" in about or "gt" in about
    above = "le" in about or "lt" in about
    if knob_spec.is_numeric and "choices" not in about and not (below and above):
        raise TypeError(
            f"knob {knob_spec.path} ({knob_spec.flag}) is a number without a range: declare a bound "
            "below (ge= or gt=) and one above (le= or lt=) in its knob()"
        )
    return knob_spec


@cache
def _adapter(kind: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _walk(cls: type, prefix: str, instance: Any) -> Iterable[Spec]:
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        default = _default(f) if instance is None else getattr(instance, f.name)
        if _META in f.metadata:
            yield _ranged(Spec(prefix + f.name, hints[f.name], default, f.metadata[_META]))
        elif is_dataclass(hints[f.name]) and default is not MISSING:
            yield from _walk(hints[f.name], f"{prefix}{f.name}.", default)


_SPECS: dict[type, tuple[Spec, ...]] = {}


def specs(cls: type) -> tuple[Spec, ...]:
    """Every knob of the dataclass `cls`, nested groups included, in declaration order."""
    if cls not in _SPECS:
        _SPECS[cls] = tuple(_walk(cls, "", None))
    return _SPECS[cls]


def spec(cls: type, name: str) -> Spec:
    """The knob of `cls` named `name` (its flag without dashes)."""
    return next(s for s in specs(cls) if s.name == name)


def build(base: T, values: Mapping[str, Any]) -> T:
    """`base` with the knobs at the dotted paths of `values` replaced (values already typed)."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        head, dot, rest = path.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = value
        else:
            top[head] = value
    for head, inner in nested.items():
        top[head] = build(getattr(base, head), inner)
    return replace(base, **top)  # type: ignore[type-var]


def parse_all(items: Iterable[tuple[Spec, Any, str]]) -> dict[str, Any]:
    """(knob, raw value, where it came from) -> typed values by path; every bad value is
    reported at once, each problem naming its variable or flag."""
    values: dict[str, Any] = {}
    problems: list[FieldProblem] = []
    for knob_spec, raw, where in items:
        try:
            values[knob_spec.path] = knob_spec.parse(raw)
        except BadValue as bad:
            problems.append(FieldProblem(where, bad.problem, bad.fix))
    if problems:
        raise InvalidInput(problems)
    return values


def load(base: T, env: Mapping[str, str], given: Mapping[str, Any] | None = None) -> T:
    """`base` (the defaults), then the knobs' variables set in `env` (an empty one counts as
    unset), then `given`: values by knob name (flags typed on the command line), which win."""
    given = given or {}
    known = specs(type(base))
    by_name = {s.name: s for s in known}
    items = [
        (s, env[s.env], s.env)
        for s in known
        if s.env is not None and env.get(s.env, "") != "" and s.name not in given
    ]
    items += [(by_name[name], raw, by_name[name].flag) for name, raw in given.items()]
    return build(base, parse_all(items))


def problems(obj: Any, where: Callable[[Spec], str] = lambda s: s.path) -> list[FieldProblem]:
    """The knobs of the dataclass instance `obj` whose values are outside their limits (for
    settings built in code rather than read)."""
    found = []
    for knob_spec in specs(type(obj)):
        value = obj
        for part in knob_spec.path.split("."):
            value = getattr(value, part)
        try:
            knob_spec.check(value)
        except BadValue as bad:
            found.append(FieldProblem(where(knob_spec), bad.problem, bad.fix))
    return found
