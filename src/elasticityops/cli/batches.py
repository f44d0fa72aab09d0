"""`eops invoke NAME --batch inputs.jsonl` (one invocation per line, through the batch route, with
a progress bar, results in input order) and `eops batch show|cancel ID`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from elasticityops.cli import remote, render
from elasticityops.cli.help_screen import App
from elasticityops.cli.progress import Counted
from elasticityops.client import InvocationFailed
from elasticityops.wire import BatchOut, ProblemOut

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (the API's shape) for machines.")]
BatchIdArg = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="Batch id (bat-...), as `eops invoke --batch` printed it.", show_default=False
    ),
]


def read_inputs(path: Path) -> list[Any]:
    """The inputs of a JSON Lines file, one JSON document a line (blank lines skipped); a line
    that is not JSON is named, before anything is sent."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        remote.bad_input(
            "cannot read the inputs",
            [
                ProblemOut(
                    field="--batch", problem=f"{path}: {why}", fix="give a JSON Lines file: one input a line"
                )
            ],
        )
    inputs: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            inputs.append(json.loads(line))
        except ValueError as exc:
            remote.bad_input(
                "an input is not JSON",
                [
                    ProblemOut(
                        field=f"--batch {path}:{number}",
                        problem=f"not valid JSON ({exc})",
                        fix="write one JSON document per line",
                    )
                ],
            )
    if not inputs:
        remote.bad_input(
            "no inputs",
            [
                ProblemOut(
                    field="--batch", problem=f"{path} holds no JSON lines", fix="write one input per line"
                )
            ],
        )
    return inputs


def run_batch(name: str, inputs_path: Path, out_path: Path | None, annotations: dict[str, str]) -> None:
    """Invoke `name` once per line of `inputs_path`, wait for all, and write one JSON line per
    input, in input order, to `out_path` (stdout without it). Exit 0 only if all succeeded."""
    inputs = read_inputs(inputs_path)
    with remote.connected() as client, Counted(remote.err, f"{name}", len(inputs)) as progress:
        results = client.map(
            name, inputs, return_exceptions=True, on_progress=progress, annotations=annotations
        )
    failed = sum(isinstance(r, InvocationFailed) for r in results)
    if out_path is None:
        _write_results(sys.stdout, results)
    else:
        try:
            with out_path.open("w", encoding="utf-8") as out:
                _write_results(out, results)
        except OSError as exc:
            remote.fail(f"cannot write the results to {out_path}: {exc.strerror}")
    where = "" if out_path is None else f"; results in {out_path}"
    remote.err.print(f"{len(results) - failed} succeeded, {failed} did not{where}", markup=False)
    if failed:
        raise typer.Exit(remote.EXIT_FAILED)


def _write_results(out: IO[str], results: list[Any]) -> None:
    for index, result in enumerate(results):
        if isinstance(result, InvocationFailed):
            inv = result.invocation
            line: dict[str, Any] = {
                "input": index,
                "id": inv.id,
                "state": inv.state.value,
                "error": result.message,
            }
        else:
            line = {"input": index, "state": "succeeded", "result": result}
        out.write(json.dumps(line, ensure_ascii=False) + "\n")


def show(batch_id: BatchIdArg, as_json: JsonFlag = False) -> None:
    """Show a batch: how many of its invocations are in each state, and the first of them."""
    with remote.connected() as client:
        batch = client.get_batch(batch_id)
    _print(batch, as_json)


def cancel(batch_id: BatchIdArg, as_json: JsonFlag = False) -> None:
    """Cancel every invocation of a batch that has not ended (queued ones never start, running
    ones are killed); those that ended stay as they ended."""
    with remote.connected() as client:
        batch = client.cancel_batch(batch_id)
    _print(batch, as_json)


def _print(batch: BatchOut, as_json: bool) -> None:
    if as_json:
        remote.print_json(batch.model_dump_json())
        return
    counts = ", ".join(f"{n} {state}" for state, n in batch.counts.items() if n)
    done = "done" if batch.done else f"{batch.ended} of {batch.count} ended"
    remote.out.print(
        f"{batch.id}  {batch.function}  {batch.count} invocations: {counts} ({done})", markup=False
    )
    if batch.items:
        remote.out.print(render.invocations_table(batch.items))
    if batch.next_cursor:
        remote.err.print(f"all of them: eops ls --batch {batch.id} --all", markup=False)


app = App(help="Show or cancel a batch of invocations (eops invoke NAME --batch FILE makes one).")
for _name, _command in (("show", show), ("cancel", cancel)):
    app.command(_name, help=remote.help_of(_command))(_command)
