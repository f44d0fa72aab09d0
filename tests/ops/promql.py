"""What the dashboard tests need of PromQL and of the Prometheus text format: the queries of a
Grafana dashboard, the metric names a query reads, promtool's verdict on a set of queries, and
the series an exporter's /metrics declares."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

# Grafana's own variables stand for a duration when the panel is drawn; promtool needs one.
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w:.])[A-Za-z_:][\w:]*")
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)")
_SAMPLE_LABELS = re.compile(r"^([A-Za-z_:][\w:]*)\{(.*)\}")
_LABEL_NAME = re.compile(r'([A-Za-z_]\w*)="(?:[^"\\]|\\.)*"')
# The clauses that name labels a result keeps or matches on: each must be on the series read.
_NAMED_LABELS = re.compile(r"\b(?:by|on)\s*\(([^)]*)\)")
_TYPE = re.compile(r"^# TYPE ([A-Za-z_:][\w:]*) (\w+)")
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel, rows' nested panels included."""
    found = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            found += [(inner["title"], target["expr"]) for target in inner.get("targets", [])]
    return found


def concrete(expr: str) -> str:
    for variable, duration in GRAFANA_DURATIONS.items():
        expr = expr.replace(variable, duration)
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects: identifiers that are neither functions, keywords, label
    names (in braces or grouping clauses) nor strings and durations."""
    text = _STRING.sub('""', concrete(expr))
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _NAME.finditer(text):
        word = match.group()
        if word in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def grouping_labels(expr: str) -> set[str]:
    """The labels `expr` groups or matches by (`by (...)`, `on (...)`): a series without them
    would be summed into one unlabelled line, which reads as a total but is not what the panel says."""
    text = _STRING.sub('""', concrete(expr))
    return {
        name.strip() for clause in _NAMED_LABELS.findall(text) for name in clause.split(",") if name.strip()
    }


def exported_labels(text: str) -> dict[str, set[str]]:
    """The label names each series of an exposition has samples with."""
    labels: dict[str, set[str]] = {}
    for line in text.splitlines():
        sample = _SAMPLE_LABELS.match(line)
        if sample and not line.startswith("#"):
            labels.setdefault(sample.group(1), set()).update(_LABEL_NAME.findall(sample.group(2)))
    return labels


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: scripts/test installs Debian's prometheus package"
    return found


def check_with_promtool(exprs: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    """`promtool check rules` over one recording rule per query: it parses each with
    Prometheus's own parser and names the one that does not parse."""
    rules = [{"record": f"dashboard:query_{i}", "expr": concrete(expr)} for i, expr in enumerate(exprs)]
    path = workdir / "dashboard-rules.json"  # JSON is YAML, and needs no quoting rules
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    return subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )


def exported_series(text: str) -> set[str]:
    """Series names an exposition has samples of, and those its `# TYPE` lines declare (a
    labelled metric has no sample before its first event, but the Python client declares it)."""
    names = set()
    for line in text.splitlines():
        typed = _TYPE.match(line)
        if typed:
            family, kind = typed.groups()
            names |= {family + suffix for suffix in _SUFFIXES.get(kind, ("",))}
        elif line and not line.startswith("#"):
            sample = _SAMPLE.match(line)
            if sample:
                names.add(sample.group(1))
    return names
