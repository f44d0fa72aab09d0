"""How `eops status` and `eops cost` show node-seconds and their cost."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from elasticityops.cli.units import day_time, seconds
from elasticityops.domain.node_seconds import Phase
from elasticityops.wire import CostGroupOut, CostReportOut, InvocationCostOut

# Column headings, in the order of a node's life.
_PHASE_LABELS = {
    Phase.provisioning: "PROVISIONING",
    Phase.idle_before_start: "IDLE BEFORE",
    Phase.run: "RUN",
    Phase.idle_after: "IDLE AFTER",
    Phase.warm_unused: "WARM UNUSED",
    Phase.run_again: "RUN AGAIN",
}


def dollars(value: float, unpriced_s: float = 0.0) -> str:
    text = f"${value:.4f}" if value < 1 else f"${value:,.2f}"
    return f"{text} + {seconds(unpriced_s)} unpriced" if unpriced_s > 0 else text


def invocation_cost_text(cost: InvocationCostOut, node_capacity: str | None = None) -> Text:
    """One line: the total, its cost, the phases that had any time, and what the current (or
    last) attempt's node is priced as (spot, on-demand, local), when a node is known."""
    parts = [
        f"{seconds(cost.node_seconds.get(p.value, 0.0))} {p.value}"
        for p in Phase
        if cost.node_seconds.get(p.value, 0.0) > 0
    ]
    line = Text.assemble(
        ("node time: ", "bold"),
        f"{seconds(cost.total_node_seconds)}, {dollars(cost.usd, cost.unpriced_node_seconds)}",
    )
    if parts:
        line.append(f" ({', '.join(parts)})")
    if node_capacity is not None:
        line.append(f", node priced {node_capacity}")
    if cost.open:
        line.append("  so far: still under way", style="dim")
    return line


def cost_table(report: CostReportOut) -> RenderableType:
    head = Text.assemble(
        ("node time ", "bold"),
        f"{day_time(report.since)} to {day_time(report.until)}: {seconds(report.total_node_seconds)}, "
        f"{dollars(report.usd, report.unpriced_node_seconds)}",
    )
    if not report.groups:
        return Group(head, Text("no node time recorded in this range", style="dim"))
    table = Table(box=None, header_style="bold", pad_edge=False)
    keys: list[str] = [k for k in ("function", "hour", "capacity", "cluster") if k in report.by]
    for key in keys:
        table.add_column(key.upper(), no_wrap=True)
    phases = _shown_phases(report.groups)
    for phase in phases:
        table.add_column(_PHASE_LABELS[phase], justify="right", no_wrap=True)
    table.add_column("TOTAL", justify="right", no_wrap=True)
    table.add_column("COST", justify="right", no_wrap=True)
    for group in report.groups:
        table.add_row(*_keys(group, keys), *_cells(group, phases))
    parts: list[RenderableType] = [head, table]
    return Group(*parts)


def _keys(group: CostGroupOut, keys: list[str]) -> list[str]:
    cells = []
    for key in keys:
        if key == "function":
            cells.append(group.function or "(warm, unused)")
        elif key == "capacity":
            cells.append(group.capacity or "-")
        elif key == "cluster":
            cells.append(group.cluster or "-")
        else:
            cells.append("-" if group.hour is None else day_time(group.hour)[:-3])
    return cells


def _shown_phases(groups: list[CostGroupOut]) -> list[Phase]:
    """Every phase of a node's life, and run_again (MultiKueue's second runs) only where a group
    has any: most reports have none, and a column of zeros says nothing."""
    again = any(g.node_seconds.get(Phase.run_again.value, 0.0) > 0 for g in groups)
    return [p for p in Phase if p is not Phase.run_again or again]


def _cells(group: CostGroupOut, phases: list[Phase]) -> list[str]:
    return [
        *(seconds(group.node_seconds.get(p.value, 0.0)) for p in phases),
        seconds(group.total_node_seconds),
        dollars(group.usd, group.unpriced_node_seconds),
    ]
