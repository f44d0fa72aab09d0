"""The doctor's report: a Rich table for people, JSON for machines. Pure: builds renderables and
strings; printing is the command's job."""

from __future__ import annotations

import json
from collections import Counter

from rich.table import Table
from rich.text import Text

from elasticityops.ops.doctor.checks import Finding, Status

STATUS_STYLE = {Status.passed: "green", Status.warn: "yellow", Status.fail: "bold red", Status.info: "cyan"}


def findings_table(findings: list[Finding]) -> Table:
    table = Table(header_style="bold", show_lines=False, expand=False)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("CHECK", no_wrap=True)
    table.add_column("WHAT", overflow="fold")
    table.add_column("FIX", overflow="fold")
    for finding in findings:
        table.add_row(
            Text(finding.status.value, style=STATUS_STYLE[finding.status]),
            finding.check,
            Text(finding.message),
            Text(
                finding.fix if finding.status in (Status.fail, Status.warn, Status.info) else "", style="dim"
            ),
        )
    return table


def summary_line(findings: list[Finding]) -> Text:
    counts = Counter(f.status for f in findings)
    parts = [
        Text(f"{counts.get(status, 0)} {status.value}", style=STATUS_STYLE[status])
        for status in (Status.fail, Status.warn, Status.passed, Status.info)
    ]
    return Text(", ").join(parts)


def findings_json(findings: list[Finding]) -> str:
    counts = Counter(f.status.value for f in findings)
    ok = counts.get(Status.fail.value, 0) == 0
    return json.dumps(
        {"ok": ok, "counts": dict(counts), "findings": [f.to_json() for f in findings]}, indent=2
    )
