"""`eops invoke`, `status`, `logs`, `cancel` and `ls`: run functions and follow their
invocations, through the Python client."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.status import Status

from elasticityops.cli import remote, render
from elasticityops.cli.help_screen import App
from elasticityops.client import Client, ClientError, WaitPolicy
from elasticityops.domain import invocation_annotations as hints
from elasticityops.domain.errors import InvalidInput
from elasticityops.domain.invocations import State
from elasticityops.wire import MAX_PAGE_SIZE, InvocationList, InvocationOut, ProblemOut

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (the API's shape) for machines.")]
IdArg = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="Invocation id (inv-...), as `eops invoke` printed it.", show_default=False
    ),
]


def read_payload(data: str | None) -> bytes:
    """--data as JSON bytes: inline JSON, or @FILE holding JSON; validated here so a typo is
    caught before the request. None: no payload (the job gets JSON null)."""
    if data is None:
        return b""
    if data.startswith("@"):
        path = Path(data[1:])
        try:
            raw = path.read_bytes()
        except OSError as exc:
            remote.bad_input(
                "cannot read the payload file",
                [ProblemOut(field="--data", problem=f"{path}: {exc.strerror}", fix="check the path after @")],
            )
        source = str(path)
    else:
        raw = data.encode()
        source = "the --data value"
    try:
        json.loads(raw)
    except ValueError as exc:
        remote.bad_input(
            "the payload is not JSON",
            [
                ProblemOut(
                    field="--data",
                    problem=f"{source} is not valid JSON ({exc})",
                    fix='pass JSON such as \'{"name": "Ada"}\', or @FILE with JSON in it',
                )
            ],
        )
    return raw


def read_annotations(pairs: list[str]) -> dict[str, str]:
    """--annotation KEY=VALUE options as a mapping, checked as the gateway checks them, so a
    typo is caught before the request."""
    try:
        return hints.parse_params(pairs, "--annotation")
    except InvalidInput as exc:
        remote.bad_input(
            "invalid --annotation",
            [ProblemOut(field=p.field, problem=p.problem, fix=p.fix) for p in exc.problems],
        )


def invoke(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Function to run.", show_default=False)],
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            "-d",
            metavar="JSON|@FILE",
            help="Payload: JSON text, or @FILE to read it from a file. Default: none (null).",
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", "-w", help="Wait for the end, showing progress; exit 0 only on success.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            "-t",
            min=0,
            metavar="SECONDS",
            help="Wait at most this long (implies --wait); it keeps running after.",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            "-k",
            metavar="KEY",
            help="Same key, same function: the same invocation, not a new one.",
        ),
    ] = None,
    annotation: Annotated[
        list[str] | None,
        typer.Option(
            "--annotation",
            "-a",
            metavar="KEY=VALUE",
            help=f"A pod annotation of this invocation, KEY under {hints.PREFIX} (repeatable), over "
            f"the function's: e.g. {hints.RUN_SECONDS}=12 makes the dev cluster's pod run 12 s. "
            "The Kubernetes backend sets them; the local backend ignores them.",
        ),
    ] = None,
    batch: Annotated[
        Path | None,
        typer.Option(
            "--batch",
            "-b",
            metavar="FILE",
            help="Invoke it once per line of this JSON Lines file (one input a line), in batches, "
            "and wait for all with a progress bar; one result line per input, in input order.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help='With --batch: write the results here (JSON Lines: {"input", "state", "result"} '
            'or {"input", "id", "state", "error"}), not to stdout.',
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Invoke a function with a JSON payload, or once per input of a file (--batch).

    Without --wait it prints the new invocation's id at once (the function runs on). With
    --wait it shows the state and the time waited until the invocation ends, then its status
    (for a failed one, the end of its output); the exit code is 0 if it succeeded, 1 otherwise.
    With --batch it always waits, and exits 0 only if every input's invocation succeeded."""
    annotations = read_annotations(annotation or [])
    if batch is not None:
        _refuse_with_batch(data=data, wait=wait or timeout is not None, key=idempotency_key, as_json=as_json)
        from elasticityops.cli.batches import run_batch  # only what --batch needs

        run_batch(name, batch, out, annotations)
        return
    if out is not None:
        remote.bad_input(
            "--out is for --batch",
            [ProblemOut(field="--out", problem="given without --batch", fix="add --batch FILE")],
        )
    payload = read_payload(data)
    # Long polls of a second: the end is seen at once and the progress line stays current.
    with remote.connected(WaitPolicy(long_poll_s=1)) as client:
        inv = client.invoke(name, payload, idempotency_key=idempotency_key, annotations=annotations)
        if not wait and timeout is None:
            if as_json:
                remote.print_json(inv.model_dump_json())
            else:
                remote.out.print(inv.id)
                remote.err.print(f"[dim]{inv.state.value}; follow it with `eops status {inv.id}`[/]")
            return
        final = _wait_with_progress(client, inv, timeout)
        tail = [] if as_json else _failure_output(client, final)
    _show_final(final, as_json, timeout, tail)


def _refuse_with_batch(*, data: str | None, wait: bool, key: str | None, as_json: bool) -> None:
    """What --batch does not combine with: its inputs are the file's lines, it always waits, it
    sends an idempotency key of its own per batch, and writes JSON lines anyway."""
    clash = [
        flag
        for flag, given in (
            ("--data", data is not None),
            ("--wait/--timeout", wait),
            ("--idempotency-key", key),
            ("--json", as_json),
        )
        if given
    ]
    if clash:
        remote.bad_input(
            "options that do not go with --batch",
            [
                ProblemOut(
                    field=flag,
                    problem="given with --batch",
                    fix="drop it: --batch reads its inputs from the file, waits, writes JSON lines",
                )
                for flag in clash
            ],
        )


def _wait_with_progress(client: Client, inv: InvocationOut, timeout: float | None) -> InvocationOut:
    started = time.monotonic()
    if remote.err.is_terminal:
        line = _ProgressLine(inv, started)
        with Status(line, console=remote.err):

            def show(current: InvocationOut) -> None:
                line.inv = current

            return _wait(client, inv, timeout, show)

    # Not a terminal (CI logs, pipes): one line per change of state instead of a spinner.
    said: list[str] = []

    def log(current: InvocationOut) -> None:
        explained = render.explain_wait(current)
        if current.state.terminal or (said and said[-1] == f"{current.state}:{explained}"):
            return
        said.append(f"{current.state}:{explained}")
        remote.err.print(render.progress_line(current, time.monotonic() - started))

    log(inv)
    return _wait(client, inv, timeout, log)


class _ProgressLine:
    """The spinner's text, rendered afresh on every refresh so the elapsed time keeps counting
    between the gateway's answers."""

    def __init__(self, inv: InvocationOut, started: float) -> None:
        self.inv = inv
        self.started = started

    def __rich__(self) -> str:
        return render.progress_line(self.inv, time.monotonic() - self.started)


def _wait(
    client: Client, inv: InvocationOut, timeout: float | None, show: Callable[[InvocationOut], None]
) -> InvocationOut:
    try:
        if inv.state.terminal:
            return inv
        return client.wait(inv.id, timeout, on_update=show)
    except KeyboardInterrupt:
        remote.err.print(
            f"stopped waiting; {inv.id} keeps going: `eops status {inv.id}`, `eops cancel {inv.id}`"
        )
        raise typer.Exit(remote.EXIT_INTERRUPTED) from None


def _failure_output(client: Client, inv: InvocationOut) -> list[str]:
    """The end of a failed (or timed out) invocation's output, where its error is; none when
    it has none, or its log cannot be read (the status is shown all the same)."""
    if inv.state not in (State.failed, State.timed_out):
        return []
    try:
        return render.output_tail(client.logs(inv.id))
    except ClientError:
        return []


def _show_detail(inv: InvocationOut, tail: list[str]) -> None:
    remote.out.print(render.invocation_detail(inv, datetime.now(UTC)))
    if tail:
        remote.out.print(render.output_tail_text(inv.id, tail))


def _show_final(inv: InvocationOut, as_json: bool, timeout: float | None, tail: list[str]) -> None:
    if as_json:
        remote.print_json(inv.model_dump_json())
    else:
        _show_detail(inv, tail)
    if not inv.state.terminal:
        remote.err.print(
            f"still {inv.state.value} after {timeout:g}s of waiting; it keeps going: `eops status {inv.id}`"
            if timeout is not None
            else f"still {inv.state.value}"
        )
    if inv.state is not State.succeeded:
        raise typer.Exit(remote.EXIT_FAILED)


def status(invocation_id: IdArg, as_json: JsonFlag = False) -> None:
    """Show an invocation: state, where its time went (queue, capacity, start, run), exit code,
    failure reason, message and result; for a failed one, the end of its output too."""
    with remote.connected() as client:
        inv = client.get_invocation(invocation_id)
        tail = [] if as_json else _failure_output(client, inv)
    if as_json:
        remote.print_json(inv.model_dump_json())
    else:
        _show_detail(inv, tail)


def logs(
    invocation_id: IdArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until it ends.")] = False,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=0,
            help="An earlier attempt's output (0 the first; a preempted invocation runs again as "
            "the next): the current one's by default.",
        ),
    ] = None,
) -> None:
    """Print an invocation's output (stdout and stderr of the job)."""
    with remote.connected() as client:
        for chunk in client.logs(invocation_id, follow=follow, attempt=attempt):
            sys.stdout.write(chunk)
            sys.stdout.flush()


def cancel(invocation_id: IdArg, as_json: JsonFlag = False) -> None:
    """Cancel an invocation: a queued one never starts, a running one is killed (its whole
    process group / its Job). Asked of a gateway replica that does not run the job, the cancel
    may only be recorded for the one that does: it says so, and that one stops it shortly."""
    with remote.connected() as client:
        inv = client.cancel(invocation_id)
    if as_json:
        remote.print_json(inv.model_dump_json())
    elif inv.state.terminal or inv.cancel_requested_at is None:
        remote.out.print(f"{inv.id}: ", render.state_text(inv.state), sep="")
    else:
        remote.out.print(
            f"{inv.id}: ",
            render.state_text(inv.state),
            ", cancel requested: the gateway replica running it stops it shortly "
            f"(`eops status {inv.id}` shows it cancelled then)",
            sep="",
        )


def list_invocations(
    function: Annotated[
        str | None, typer.Option("--function", metavar="NAME", help="Only this function's invocations.")
    ] = None,
    state: Annotated[
        State | None,
        typer.Option(
            "--state",
            "-s",
            help=f"Only invocations in this state: {', '.join(s.value for s in State)}.",
            case_sensitive=False,
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", metavar="N", min=1, max=MAX_PAGE_SIZE, help="Show at most N (a page)."),
    ] = 20,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Continue after a previous page (printed below it).")
    ] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Fetch every page, not only the first.")] = False,
    batch: Annotated[
        str | None, typer.Option("--batch", metavar="ID", help="Only this batch's invocations (bat-...).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List invocations, newest first."""
    state_value = state.value if state is not None else None
    with remote.connected() as client:
        if all_pages:
            items = list(
                client.iter_invocations(function=function, state=state_value, page_size=limit, batch=batch)
            )
            page = InvocationList(items=items, next_cursor=None)
        else:
            page = client.list_invocations(
                function=function, state=state_value, limit=limit, cursor=cursor, batch=batch
            )
    if as_json:
        remote.print_json(page.model_dump_json())
        return
    if not page.items:
        remote.err.print("no invocations match")
        return
    remote.out.print(render.invocations_table(page.items))
    if page.next_cursor:
        filters = "".join(
            f" {flag} {value}"
            for flag, value in (
                ("--function", function),
                ("--state", state_value),
                ("--batch", batch),
                ("--limit", limit),
            )
            if value is not None
        )
        remote.err.print(f"more: eops ls{filters} --cursor {page.next_cursor}", markup=False)


def headroom(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (the API's shape) instead of a table.")
    ] = False,
) -> None:
    """What the gateway keeps warm (eops serve --headroom): its policy, and per shape of work
    (GPU type and count, CPU, memory) the warm units wanted and held, and the work busy and
    waiting."""
    with remote.connected() as client:
        status = client.headroom()
    if as_json:
        remote.print_json(status.model_dump_json())
        return
    remote.out.print(render.headroom_table(status))


app = App()
for _name, _command in (
    ("invoke", invoke),
    ("status", status),
    ("logs", logs),
    ("cancel", cancel),
    ("ls", list_invocations),
    ("headroom", headroom),
):
    app.command(_name, help=remote.help_of(_command))(_command)
