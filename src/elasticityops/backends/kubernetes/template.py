"""Manifests with holes: one description of a set of objects that both `eops render deploy` and
the Helm chart are made from (docs/helm.md, "One source").

A template is plain data (dicts, lists, scalars) in which three kinds of node stand for what
depends on the options: a `Value` (read from the options; in the chart, from `.Values`), a `Text`
(strings and values joined) and a `When` (a part that is there only when a `Condition` holds, or
another part when it does not); the chart alone also has `Each` (a part repeated per entry of a
map it computes). `evaluate(template, options)` is the renderer's back end: the
plain objects `kubectl apply` takes. The chart's back end (ops/chart.py) writes the same nodes as
Go template text. Nothing here knows which options it reads: a node holds a function of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Node = Any
"""A dict, list or scalar, possibly holding Value, Text and When nodes at any depth."""


class _Absent:
    """What a `When` without an otherwise part is when its test fails: the key or item goes."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


@dataclass(frozen=True)
class Value:
    """One value of the options. `path` is its key in the chart's values (dotted), `of` reads it
    from the renderer's options, `knob` names the option's knob (its help and limits document
    the chart's value); `helm` is the Go template expression, when it is not `.Values.<path>`."""

    path: str | None
    of: Callable[[Any], Any] = field(compare=False)
    knob: str | None = None
    helm: str | None = None
    about: str | None = None
    """What the chart's values.yaml says of it, where the knob's help does not fit."""
    schema: tuple[tuple[str, Any], ...] = ()
    """JSON-schema keywords for values.schema.json beyond the type (a pattern)."""

    @property
    def expression(self) -> str:
        return self.helm or f".Values.{self.path}"


@dataclass(frozen=True)
class Text:
    """A string made of literal parts and values (a DNS name with the namespace in it)."""

    parts: tuple[str | Value, ...]


def text(*parts: str | Value) -> Text:
    return Text(parts)


@dataclass(frozen=True)
class Condition:
    """A condition on the options: `holds` for the renderer, `helm` for the chart (a Go template
    pipeline). `helm` None: the part is the renderer's only and the chart never has it."""

    holds: Callable[[Any], bool] = field(compare=False)
    helm: str | None
    values: tuple[Value, ...] = ()
    """The values the condition reads (the chart documents each)."""


def present(value: Value) -> Condition:
    """The value is set (not None, not empty, not false)."""
    return Condition(lambda options: bool(value.of(options)), value.expression, (value,))


def more_than(value: Value, bound: int) -> Condition:
    return Condition(
        lambda options: int(value.of(options)) > bound, f"gt (int {value.expression}) {bound}", (value,)
    )


def at_most(value: Value, bound: int) -> Condition:
    return Condition(
        lambda options: int(value.of(options)) <= bound, f"le (int {value.expression}) {bound}", (value,)
    )


def equals(value: Value, wanted: str) -> Condition:
    return Condition(
        lambda options: str(value.of(options)) == wanted, f'eq {value.expression} "{wanted}"', (value,)
    )


RENDER_ONLY = Condition(lambda options: True, None)
"""What `eops render deploy` prints and the chart leaves out (the release's namespace is Helm's)."""


@dataclass(frozen=True)
class When:
    test: Condition
    then: Node
    otherwise: Node = ABSENT


@dataclass(frozen=True)
class Each:
    """A part repeated for each entry of a map the chart computes (Go's `range`, e.g.
    `$type, $gpus := $quota`), where `body` reads the entry through Values whose `helm` is a
    template variable. The chart's only: `eops render deploy` has none, and the chart's Kueue
    objects, which have, are tested against `eops render kueue` itself."""

    header: str
    body: Node


def evaluate(node: Node, options: Any) -> Any:
    """The plain data `node` stands for under `options`; ABSENT where a `When` leaves nothing."""
    if isinstance(node, When):
        return evaluate(node.then if node.test.holds(options) else node.otherwise, options)
    if isinstance(node, Each):
        raise TypeError(f"range {node.header} is the chart's only: no renderer evaluates it")
    if isinstance(node, Value):
        return node.of(options)
    if isinstance(node, Text):
        return "".join(_as_go_prints(evaluate(part, options)) for part in node.parts)
    if isinstance(node, dict):
        out = {key: evaluate(value, options) for key, value in node.items()}
        return {key: value for key, value in out.items() if value is not ABSENT}
    if isinstance(node, list):
        return [item for item in (evaluate(value, options) for value in node) if item is not ABSENT]
    return node


def _as_go_prints(value: Any) -> str:
    """`value` as the chart's `print` writes it: a whole float without its ".0" (Go's %v)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def objects(template: list[Node], options: Any) -> list[dict[str, Any]]:
    """The objects a template of top-level objects renders to under `options`, in order."""
    rendered: list[dict[str, Any]] = evaluate(template, options)
    return rendered


def values_in(node: Node) -> Iterator[Value]:
    """Every Value a template reads, in the order first met (tests' values included)."""
    if isinstance(node, Value):
        yield node
    elif isinstance(node, Text):
        for part in node.parts:
            yield from values_in(part)
    elif isinstance(node, When):
        yield from node.test.values
        yield from values_in(node.then)
        yield from values_in(node.otherwise)
    elif isinstance(node, Each):
        yield from values_in(node.body)
    elif isinstance(node, dict):
        for value in node.values():
            yield from values_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from values_in(item)
