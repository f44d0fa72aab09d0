"""The Helm chart of the gateway (charts/elasticityops), written from the template that
`eops render deploy` evaluates (backends/kubernetes/deploy.py: deploy_template), so the two can
never say different things: each `Value` becomes `{{ .Values.<path> | toJson }}`, each `When`
an `{{- if }}` block, and values.yaml, values.schema.json and the chart's README list the values
with the help of the knobs they stand for. Pure: files by name in, nothing written here.

Helm cannot run Python, so the chart is committed, and a test fails when it is not what this
module writes (`eops render chart --out charts/elasticityops` brings it up to date)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from elasticityops import __version__
from elasticityops.backends.kubernetes.deploy import (
    CHART_REFUSES,
    CHART_VALUES,
    IMAGE,
    DeployOptions,
    deploy_template,
)
from elasticityops.backends.kubernetes.template import ABSENT, Each, Node, Text, Value, When, values_in
from elasticityops.knobs import Spec, spec
from elasticityops.ops.chart_kueue import (
    PRELUDE_VALUES,
    QUEUE_VALUES,
    QueueValues,
    queue_condition,
    queue_prelude,
    queue_template,
)
from elasticityops.ops.chart_workers import PRELUDE_VALUES as WORKER_PRELUDE_VALUES
from elasticityops.ops.chart_workers import workers_prelude
from elasticityops.ops.kueue import KueueInputs

CHART = "elasticityops"
Lines = list[str]

_HEADER = (
    "# Written by `eops render chart` from the template of `eops render deploy`: edit\n"
    "# src/elasticityops/backends/kubernetes/deploy.py and write the chart again, not this file.\n"
)


def _plain(value: Any) -> str:
    """One YAML scalar as PyYAML writes it (quoted where it would read as another type)."""
    if value == {}:
        return "{}"
    if value == []:
        return "[]"
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 30)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def _go_string(part: str) -> str:
    return json.dumps(part)  # a JSON string is a Go template string literal


def _scalar(node: Node) -> str:
    if isinstance(node, Value):
        # A string value given as a number (`--set gpuBudget=8`) still renders as a string.
        as_text = " | toString" if isinstance(_default(node), str) else ""
        return f"{{{{ {node.expression}{as_text} | toJson }}}}"
    if isinstance(node, Text):
        parts = " ".join(p.expression if isinstance(p, Value) else _go_string(p) for p in node.parts)
        return f"{{{{ print {parts} | toJson }}}}"
    return _plain(node)


def _inline(node: Node) -> bool:
    return not isinstance(node, dict | list | When | Each) or node in ({}, [])


def _directive(indent: int, words: str) -> str:
    return f"{' ' * indent}{{{{- {words} }}}}"


def _branch(when: When, emit: Callable[[Node], Lines], indent: int) -> Lines:
    if when.test.helm is None:  # the renderer's only
        return []
    lines = [_directive(indent, f"if {when.test.helm}"), *emit(when.then)]
    if when.otherwise is not ABSENT:
        lines += [_directive(indent, "else"), *emit(when.otherwise)]
    return [*lines, _directive(indent, "end")]


def _entry(key: str, value: Node, indent: int) -> Lines:
    if isinstance(value, When):
        return _branch(value, lambda chosen: _entry(key, chosen, indent), indent)
    pad = " " * indent
    if _inline(value):
        return [f"{pad}{_plain(key)}: {_scalar(value)}"]
    body = _mapping(value, indent + 2) if isinstance(value, dict) else _sequence(value, indent + 2)
    return [f"{pad}{_plain(key)}:", *body]


def _mapping(node: dict[str, Node], indent: int) -> Lines:
    return [line for key, value in node.items() for line in _entry(key, value, indent)]


def _item(item: Node, indent: int) -> Lines:
    if isinstance(item, When):
        return _branch(item, lambda chosen: _item(chosen, indent), indent)
    if isinstance(item, Each):
        return [
            _directive(indent, f"range {item.header}"),
            *_item(item.body, indent),
            _directive(indent, "end"),
        ]
    pad = " " * indent
    if _inline(item):
        return [f"{pad}- {_scalar(item)}"]
    body = _mapping(item, indent + 2) if isinstance(item, dict) else _sequence(item, indent + 2)
    if body[0].lstrip().startswith("{{-"):
        # A conditional first key: the dash stands alone, the mapping follows below it.
        return [f"{pad}-", *body]
    return [f"{pad}- {body[0][indent + 2 :]}", *body[1:]]


def _sequence(node: list[Node], indent: int) -> Lines:
    return [line for item in node for line in _item(item, indent)]


def _document(node: Node) -> Lines:
    if isinstance(node, When):
        return _branch(node, _document, 0)
    if isinstance(node, Each):
        # One document per entry: each repetition starts its own.
        return [_directive(0, f"range {node.header}"), "---", *_document(node.body), _directive(0, "end")]
    return _mapping(node, 0)


def _kind(node: Node) -> str:
    while isinstance(node, When | Each):
        node = node.then if isinstance(node, When) else node.body
    return str(node["kind"])


def _refusals() -> Lines:
    lines: Lines = []
    for test, message in CHART_REFUSES:
        lines += [
            _directive(0, f"if {test.helm}"),
            _directive(0, f"fail {_go_string(message)}"),
            _directive(0, "end"),
        ]
    return lines


def template_text(nodes: list[Node]) -> str:
    """Go template text of top-level objects: one YAML document each (none for the renderer's
    own), what `helm template` turns back into `evaluate(nodes, options)`."""
    documents = [lines for lines in (_document(node) for node in nodes) if lines]
    return "\n---\n".join("\n".join(lines) for lines in documents)


def template_files() -> dict[str, str]:
    """templates/<kind>.yaml: the objects of each kind."""
    by_kind: dict[str, list[Node]] = {}
    for node in deploy_template():
        by_kind.setdefault(_kind(node).lower(), []).append(node)
    files = {}
    for kind, nodes in by_kind.items():
        body = template_text(nodes)
        if not body:
            continue
        head = [*_refusals(), *workers_prelude()] if kind == "deployment" else []
        files[f"templates/{kind}.yaml"] = _HEADER + "\n".join([*head, body]) + "\n"
    # The Kueue objects: one file, inside one `if`, since its documents share the variables
    # that its prelude sets.
    queues = [_directive(0, f"if {queue_condition()}"), *queue_prelude(), template_text(queue_template())]
    header = (
        "# Written by `eops render chart` from the objects of `eops render kueue`: edit\n"
        "# src/elasticityops/ops/kueue.py (or ops/chart_kueue.py) and write the chart again, not this file.\n"
    )
    files["templates/kueue.yaml"] = header + "\n".join([*queues, _directive(0, "end")]) + "\n"
    return files


def _check_values() -> None:
    """Every value the template reads is one the chart declares (and so documents)."""
    read = {v.path for v in values_in([*deploy_template(), *queue_template()]) if v.path is not None}
    for test, _ in CHART_REFUSES:
        read |= {v.path for v in test.values if v.path is not None}
    read |= {v.path for v in (*PRELUDE_VALUES, *WORKER_PRELUDE_VALUES) if v.path is not None}
    declared = {v.path for v in ALL_VALUES if v.path is not None}
    if read != declared:
        raise ValueError(f"chart values out of step with the template: {sorted(read ^ declared)}")


ALL_VALUES: tuple[Value, ...] = (*CHART_VALUES, *QUEUE_VALUES)
"""Every value of the chart: the deploy template's, then the Kueue objects'."""
_QUEUE_PATHS = {v.path for v in QUEUE_VALUES}


def _source(value: Value) -> tuple[Any, type, str]:
    """The options a value reads, their dataclass and the command whose flags they are."""
    if value.path in _QUEUE_PATHS:
        return QueueValues(), KueueInputs, "eops render kueue"
    return DeployOptions(), DeployOptions, "eops render deploy"


def _knob(value: Value) -> Spec | None:
    return spec(_source(value)[1], value.knob) if value.knob else None


def _default(value: Value) -> Any:
    return value.of(_source(value)[0])


def _about(value: Value) -> str:
    knob = _knob(value)
    said = value.about or (knob.help if knob else "")
    if knob is None:
        return said
    limits = f"; {knob.limits}" if knob.limits else ""
    return f"{said} ({_source(value)[2]} {knob.flag}{limits})"


def _nested(values: tuple[Value, ...]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for value in values:
        assert value.path is not None
        *parents, leaf = value.path.split(".")
        branch = tree
        for part in parents:
            branch = branch.setdefault(part, {})
        branch[leaf] = value
    return tree


def _wrap(text: str, indent: int, width: int = 100) -> Lines:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width - indent - 2:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [f"{' ' * indent}# {part}" for part in [*lines, line] if part]


def _values_lines(tree: dict[str, Any], indent: int) -> Lines:
    lines: Lines = []
    for key, node in tree.items():
        if indent == 0 and lines:
            lines.append("")
        if isinstance(node, Value):
            lines += [*_wrap(_about(node), indent), f"{' ' * indent}{key}: {_plain(_default(node))}"]
        else:
            lines += [f"{' ' * indent}{key}:", *_values_lines(node, indent + 2)]
    return lines


def values_yaml() -> str:
    intro = (
        "# Values of the elasticityops chart. Each is one option of `eops render deploy` (named at\n"
        "# the end of its comment): the chart and that command are made from one template.\n"
        "# The objects are named elasticityops whatever the release is called: one release per\n"
        "# namespace; its namespace is the gateway's (EOPS_KUBE_NAMESPACE, where its Jobs run).\n"
    )
    return _HEADER + intro + "\n" + "\n".join(_values_lines(_nested(ALL_VALUES), 0)) + "\n"


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def _schema_of(value: Value) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": _JSON_TYPES[type(_default(value))], "description": _about(value)}
    knob = _knob(value)
    if knob is not None:
        for bound, keyword in (("ge", "minimum"), ("le", "maximum")):
            if bound in knob.about:
                schema[keyword] = knob.about[bound]  # type: ignore[literal-required]
        if "choices" in knob.about:
            schema["enum"] = ([""] if knob.optional else []) + list(knob.about["choices"])
    schema.update(dict(value.schema))
    return schema


def _schema_tree(tree: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            key: _schema_of(node) if isinstance(node, Value) else _schema_tree(node)
            for key, node in tree.items()
        },
    }


def values_schema() -> str:
    root = _schema_tree(_nested(ALL_VALUES))
    # Helm hands a subchart its parent's `global` values: allowed, never read.
    root["properties"]["global"] = {"type": "object"}
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "elasticityops chart values",
        **root,
    }
    return json.dumps(schema, indent=2) + "\n"


def chart_yaml() -> str:
    image_tag = str(_default(IMAGE)).rpartition(":")[2]
    chart = {
        "apiVersion": "v2",
        "name": CHART,
        "description": "ElasticityOps: GPU functions as Kubernetes Jobs behind one HTTP gateway",
        "type": "application",
        "version": __version__,
        "appVersion": image_tag,
    }
    return _HEADER + yaml.safe_dump(chart, sort_keys=False)


def readme() -> str:
    rows = [
        f"| `{value.path}` | `{json.dumps(_default(value))}` | {_about(value).replace('|', '/')} |"
        for value in ALL_VALUES
    ]
    return (
        "<!-- Written by `eops render chart`; see docs/helm.md. -->\n"
        "# elasticityops chart\n\n"
        "The gateway (Deployment, Service, ServiceAccount, least-privilege RBAC, PriorityClasses,\n"
        "PodDisruptionBudget and ServiceMonitor where asked), made from the same template as\n"
        "`eops render deploy`; with `kueue.queues.create`, the Kueue objects of `eops render kueue`\n"
        "too (docs/kueue.md). Install with `helm install eops charts/elasticityops -n NAMESPACE\n"
        "--create-namespace`; docs/helm.md says more.\n\n"
        "| value | default | what it is |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def notes() -> str:
    return (
        "ElasticityOps gateway {{ .Release.Name }} in namespace {{ .Release.Namespace }}.\n"
        "Its readiness (and role, with several replicas): kubectl -n {{ .Release.Namespace }} "
        "port-forward svc/elasticityops 8080 & curl http://127.0.0.1:8080/readyz\n"
        "Its admin token is printed in the pod's log at its first start: kubectl -n "
        "{{ .Release.Namespace }} logs deploy/elasticityops\n"
    )


def render_chart() -> dict[str, str]:
    """Every file of charts/elasticityops, by path inside it."""
    _check_values()
    return {
        "Chart.yaml": chart_yaml(),
        "values.yaml": values_yaml(),
        "values.schema.json": values_schema(),
        "README.md": readme(),
        "templates/NOTES.txt": notes(),
        **template_files(),
    }


def differences(wanted: dict[str, str], found: dict[str, str]) -> list[str]:
    """The chart's files that are missing, stale or not written by render_chart, by path."""
    return sorted(path for path in wanted.keys() | found.keys() if wanted.get(path) != found.get(path))
