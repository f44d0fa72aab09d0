"""How the CLI shows functions and invocations: tables for lists, a timeline that says where an
invocation's time went, and the one-line progress text of `invoke --wait`. Pure: builds rich
renderables and strings from wire models; printing is the commands' job."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import yaml
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from elasticityops.cli.render_cost import invocation_cost_text
from elasticityops.cli.units import day_time, seconds
from elasticityops.domain import wait_phases
from elasticityops.domain.invocations import State
from elasticityops.wire import FunctionOut, HeadroomOut, InvocationOut

STATE_STYLE = {
    State.queued: "cyan",
    State.pending: "yellow",
    State.running: "blue",
    State.succeeded: "green",
    State.failed: "red",
    State.cancelled: "magenta",
    State.timed_out: "red",
}

# What the time of each phase (domain/wait_phases.py, the rule the console's bar follows too)
# was spent on. Admission waits for a free GPU too where the GPUs are counted (local slots,
# EOPS_GPU_BUDGET): then a busy GPU shows as queue time, not as capacity time.
PHASE_TEXT = {
    wait_phases.QUEUE: "waiting for admission (free GPU, quota)",
    wait_phases.KUEUE: "waiting in Kueue's queue (quota, admission checks)",
    wait_phases.CAPACITY: "waiting for a GPU (slot / node)",
    wait_phases.START: "starting the process / container",
    wait_phases.RUN: "running",
}
# After Kueue's admission, what is left of the wait for capacity is the wait for a node.
AFTER_KUEUE = "waiting for a node"
BAR_WIDTH = 20  # the timeline table then fits 80 columns
TAIL_LINES = 20  # of a failed invocation's output, under its status
TAIL_CHARS = 16 * 1024  # the most of its output read for them, as the console keeps


def state_text(state: State) -> Text:
    return Text(state.value, style=STATE_STYLE[state])


def clock_time(at: datetime | None) -> str:
    """Local wall-clock time with milliseconds, or '-'."""
    if at is None:
        return "-"
    return at.astimezone().strftime("%H:%M:%S.%f")[:-3]


def functions_table(items: list[FunctionOut]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("NAME", "VERSION", "GPU", "PRIORITY", "TIMEOUT", "MAX CONC.", "UPDATED"):
        table.add_column(column, no_wrap=True)
    for item in items:
        spec = item.spec
        table.add_row(
            spec.name,
            str(item.version),
            f"{spec.gpu.count} x {', then '.join(spec.gpu.types)}",
            spec.priority.value,
            f"{spec.timeout_seconds}s",
            str(spec.max_concurrency),
            day_time(item.updated_at),
        )
    return table


def function_detail(item: FunctionOut) -> RenderableType:
    head = Text.assemble(
        (item.spec.name, "bold"),
        f"  version {item.version}, created {day_time(item.created_at)}, updated {day_time(item.updated_at)}",
    )
    body = yaml.safe_dump(item.spec.model_dump(mode="json"), sort_keys=False).rstrip()
    return Group(head, Text(body))


def invocations_table(items: list[InvocationOut]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    # Ids are what users copy into the next command: never cut, whatever the terminal width.
    table.add_column("ID", no_wrap=True, min_width=max((len(inv.id) for inv in items), default=2))
    for column in ("FUNCTION", "STATE", "ACCEPTED", "TO START", "RUN", "EXIT"):
        table.add_column(column, no_wrap=True)
    for inv in items:
        table.add_row(
            inv.id,
            inv.function,
            state_text(inv.state),
            inv.timeline.accepted.astimezone().strftime("%m-%d %H:%M:%S"),
            seconds(inv.durations.get("time_to_start")),
            seconds(inv.durations.get("run")),
            "-" if inv.exit_code is None else str(inv.exit_code),
        )
    return table


def phase_seconds(inv: InvocationOut, now: datetime) -> list[tuple[str, str, float | None, bool]]:
    """(phase, explanation, seconds, still going) for each phase that has begun. A phase that
    began and has not ended counts up to `now` while the invocation is live."""
    rows: list[tuple[str, str, float | None, bool]] = []
    spans = wait_phases.phase_spans(inv.timeline, inv.notes)
    split = any(span.name == wait_phases.KUEUE for span in spans)
    for span in spans:
        what = AFTER_KUEUE if split and span.name == wait_phases.CAPACITY else PHASE_TEXT[span.name]
        if span.end is not None:
            rows.append((span.name, what, (span.end - span.start).total_seconds(), False))
        elif not inv.state.terminal:
            rows.append((span.name, what, max(0.0, (now - span.start).total_seconds()), True))
    return rows


def timeline_table(inv: InvocationOut, now: datetime) -> Table:
    rows = phase_seconds(inv, now)
    longest = max((s for _, _, s, _ in rows if s is not None), default=0.0)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("PHASE", no_wrap=True)
    table.add_column("SECONDS", justify="right", no_wrap=True)
    table.add_column("SHARE", no_wrap=True)
    table.add_column("SPENT ON", no_wrap=True)
    for phase, what, spent, going in rows:
        width = 0 if not longest or spent is None else max(1, round(BAR_WIDTH * spent / longest))
        label = seconds(spent) + (" so far" if going else "")
        table.add_row(phase, label, Text("█" * width, style="cyan"), what)
    return table


def milestones_table(inv: InvocationOut) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("MILESTONE", no_wrap=True)
    table.add_column("AT", no_wrap=True)
    tl = inv.timeline
    for name, at in (
        ("accepted", tl.accepted),
        ("dispatched", tl.dispatched),
        ("capacity ready", tl.capacity_ready),
        ("started", tl.started),
        ("finished", tl.finished),
    ):
        table.add_row(name, clock_time(at))
    if tl.preempted is not None:
        table.add_row("last requeued", clock_time(tl.preempted))
    return table


def invocation_detail(inv: InvocationOut, now: datetime) -> RenderableType:
    """Everything `eops status` shows: state, where the time went, how it ended, the result."""
    parts: list[RenderableType] = [
        Text.assemble((inv.id, "bold"), "  ", inv.function, "  ", state_text(inv.state)),
        Text(", ".join(_facts(inv)), style="dim"),
        *_how_it_stands(inv),
        Text(""),
        timeline_table(inv, now),
    ]
    totals = [
        f"{label} {seconds(value)}"
        for key, label in (("time_to_start", "time to start"), ("total", "total"))
        if (value := inv.durations.get(key)) is not None
    ]
    if totals:
        parts.append(Text(", ".join(totals), style="bold"))
    if inv.cost is not None:
        parts.append(invocation_cost_text(inv.cost, inv.node_capacity))
    parts.append(Text(""))
    parts.append(milestones_table(inv))
    if inv.notes:
        parts.append(Text("\nnotes (what explained the wait):", style="bold"))
        parts.extend(Text(f"  {clock_time(note.at)}  {note.kind}: {note.message}") for note in inv.notes)
    if inv.result is not None:
        parts.append(Text("\nresult:", style="bold"))
        parts.append(Text(result_text(inv.result)))
    return Group(*parts)


def _facts(inv: InvocationOut) -> list[str]:
    """The one dim line under the head: priority, GPU, attempt, node, cluster, exit code, key."""
    facts = [f"priority {inv.priority}"]
    if inv.gpu_type:
        facts.append(inv.gpu_type)
    if inv.attempt:
        facts.append(f"attempt {inv.attempt} (requeued {inv.attempt}x)")
    if inv.preempting_by:
        facts.append(f"being preempted for {inv.preempting_by}")
    if inv.node:
        facts.append(f"on {inv.node}")
    if inv.cluster:
        facts.append(f"in cluster {inv.cluster}")
    if inv.exit_code is not None:
        facts.append(f"exit code {inv.exit_code}")
    if inv.idempotency_key:
        facts.append(f"idempotency key {inv.idempotency_key}")
    return facts


def _how_it_stands(inv: InvocationOut) -> list[RenderableType]:
    """Its annotations, why it failed, and where it waits in the queue: what applies of them."""
    lines: list[RenderableType] = []
    if inv.annotations:
        pairs = " ".join(f"{key}={value}" for key, value in sorted(inv.annotations.items()))
        lines.append(Text.assemble(("annotations: ", "bold"), pairs))
    if inv.failure_reason is not None:
        lines.append(Text.assemble(("failure reason: ", "bold red"), inv.failure_reason.value))
    if inv.message:
        lines.append(Text.assemble(("message: ", "bold"), inv.message))
    if inv.queue_position is not None:
        where = f"queue position {inv.queue_position}"
        lines.append(Text.assemble((where, "bold cyan"), f": {inv.queue_reason}" if inv.queue_reason else ""))
    return lines


def output_tail(chunks: Iterable[str], lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> list[str]:
    """The last `lines` lines of an invocation's output (stdout and stderr, where a failure
    says why), within its last `chars` characters, each made safe to print on a terminal."""
    kept = ""
    for chunk in chunks:
        kept = (kept + chunk)[-chars:]
    return [
        "".join(c if c == "\t" or c.isprintable() else "\ufffd" for c in line)
        for line in kept.splitlines()[-lines:]
    ]


def output_tail_text(invocation_id: str, tail: list[str]) -> RenderableType:
    """The tail under its heading, then the command that prints all of it."""
    return Group(
        Text("\nthe end of its output (stdout and stderr):", style="bold"),
        *(Text(f"  {line}") for line in tail),
        Text(f"the whole log: eops logs {invocation_id}", style="dim"),
    )


def result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, indent=2, ensure_ascii=False)


def current_phase(inv: InvocationOut) -> tuple[str, datetime]:
    """The phase an invocation is in, by its timeline, and when that phase began."""
    t = inv.timeline
    if inv.state is State.queued:
        return "queued", t.accepted
    if inv.state is State.pending:
        if t.capacity_ready is not None:
            return "starting", t.capacity_ready
        spans = wait_phases.phase_spans(t, inv.notes)
        if any(span.name == wait_phases.KUEUE for span in spans):
            last = spans[-1]
            return ("in Kueue's queue" if last.name == wait_phases.KUEUE else AFTER_KUEUE), last.start
        return "waiting for a GPU", t.dispatched or t.accepted
    if inv.state is State.running:
        return "running", t.started or t.accepted
    return inv.state.value, t.finished or t.accepted


def progress_line(inv: InvocationOut, elapsed: float) -> str:
    """`running 1.0s (5.0s in all): running on slot-0`: the phase it is in and for how long,
    the time since it was accepted, and why it waits. `elapsed` is the caller's own measure of
    the time since the invocation was accepted; the phase's share comes from the timeline's
    differences (the gateway's clock), so the two machines' clocks need not agree."""
    phase, since = current_phase(inv)
    explained = escape(explain_wait(inv))
    if since == inv.timeline.accepted:
        return f"{phase} {elapsed:.1f}s: {explained}"
    in_phase = max(0.0, elapsed - (since - inv.timeline.accepted).total_seconds())
    return f"{phase} {in_phase:.1f}s ({elapsed:.1f}s in all): {explained}"


def explain_wait(inv: InvocationOut) -> str:
    if inv.state is State.queued:
        return "in the queue, waiting for admission (a free GPU, the GPU budget, max_concurrency)"
    if inv.state is State.pending:
        if inv.notes:
            return inv.notes[-1].message
        if inv.timeline.capacity_ready is not None:
            return f"GPU assigned{' on ' + inv.node if inv.node else ''}, starting"
        return "waiting for a GPU slot"
    if inv.state is State.running:
        return f"running on {inv.node}" if inv.node else "running"
    return inv.message or inv.state.value


def headroom_table(status: HeadroomOut) -> RenderableType:
    head = Text.assemble(("headroom ", "bold"), status.policy)
    if status.mechanism:
        head.append(f"  ({status.mechanism}; {status.syncs} sizings)")
    if status.last_error:
        head.append(f"\nlast sizing failed: {status.last_error}", style="red")
    if not status.pools:
        return head
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("SHAPE", "GPU", "EACH ASKS", "WANTED", "HELD", "BUSY", "WAITING"):
        table.add_column(column, no_wrap=True)
    for pool in status.pools:
        table.add_row(
            pool.shape,
            f"{pool.gpu_count} x {pool.gpu_type}",
            pool.describe,
            str(pool.wanted),
            str(pool.held),
            str(pool.busy),
            str(pool.waiting),
        )
    return Group(head, table)
