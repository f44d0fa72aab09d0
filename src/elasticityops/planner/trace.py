"""Traces in and out: a CSV with a header and at least `arrival_s,duration_s` (seconds from the
trace start); optional `function`, `gpu_type`, `priority` are carried through but not modelled.
Validation errors name the line (the header is line 1) and exit the CLI with code 2."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from elasticityops.planner.errors import PlannerInputError

REQUIRED = ("arrival_s", "duration_s")
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival. arrival_s, duration_s: seconds. function, gpu_type: a label
    per request (gpu_type is carried from an imported log to the file, not modelled)."""

    arrival_s: FloatArray
    duration_s: FloatArray
    function: tuple[str, ...] | None = None
    gpu_type: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def span_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self) else 0.0


@dataclass(frozen=True)
class LoadNotes:
    """What loading changed: how many rows were out of order (and were sorted), first such line."""

    unsorted_rows: int = 0
    first_unsorted_line: int = 0


def load_trace(path: Path, *, on_unsorted: str = "sort") -> tuple[Trace, LoadNotes]:
    """Read and validate a trace CSV. on_unsorted: "sort" (sort and report) or "refuse"."""
    arrivals, durations, functions = _read_rows(path)
    if not arrivals:
        raise PlannerInputError(f"--trace: {path} has a header but no rows")
    arr = _column(arrivals, "arrival_s", path)
    dur = _column(durations, "duration_s", path)
    order_breaks = np.flatnonzero(np.diff(arr) < 0)
    if not len(order_breaks):
        return Trace(arr, dur, tuple(functions) if functions else None), LoadNotes()
    first_line = int(order_breaks[0]) + 3  # the later row of the first decreasing pair
    if on_unsorted == "refuse":
        raise PlannerInputError(
            f"--trace: {path} line {first_line}: arrival_s goes backwards "
            f"({arr[first_line - 3]:g} then {arr[first_line - 2]:g}); "
            "sort the trace or drop --strict-order"
        )
    order = np.argsort(arr, kind="stable")
    in_order = tuple(functions[k] for k in order.tolist()) if functions else None
    notes = LoadNotes(unsorted_rows=len(order_breaks), first_unsorted_line=first_line)
    return Trace(arr[order], dur[order], in_order), notes


def _read_rows(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The arrival, duration and (if the header has it) function column as text, blank rows
    skipped; a missing column or a row of the wrong width is refused naming its line."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise PlannerInputError(f"--trace: cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise PlannerInputError(f"--trace: {path} is empty (expected a header with arrival_s,duration_s)")
        names = [h.strip() for h in header]
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            raise PlannerInputError(
                f"--trace: {path} line 1: missing column(s) {', '.join(missing)}; found {', '.join(names)}"
            )
        ia, id_ = names.index("arrival_s"), names.index("duration_s")
        ifn = names.index("function") if "function" in names else -1
        width = len(names)
        arrivals: list[str] = []
        durations: list[str] = []
        functions: list[str] = []
        for line, row in enumerate(reader, start=2):
            if len(row) != width:
                if not row:
                    continue
                raise PlannerInputError(f"--trace: {path} line {line}: {len(row)} fields, header has {width}")
            arrivals.append(row[ia])
            durations.append(row[id_])
            if ifn >= 0:
                functions.append(row[ifn])
    return arrivals, durations, functions


def _column(values: list[str], name: str, path: Path) -> FloatArray:
    try:
        col = np.array(values, dtype=np.float64)
    except ValueError:
        col = None
    if col is None or not np.all(np.isfinite(col)) or np.any(col < 0):
        for line, text in enumerate(values, start=2):
            try:
                value = float(text)
            except ValueError:
                raise PlannerInputError(
                    f"--trace: {path} line {line}: {name} {text!r} is not a number"
                ) from None
            if not math.isfinite(value) or value < 0:
                raise PlannerInputError(
                    f"--trace: {path} line {line}: {name} {text!r} must be a finite number >= 0"
                )
    assert col is not None
    return col


def write_trace(path: Path, trace: Trace, *, gpu_type: str = "nvidia-tesla-t4") -> None:
    """Write `arrival_s,duration_s,function,gpu_type,priority` with millisecond precision; the
    trace's own GPU types where it has them, else `gpu_type` for every row."""
    funcs = trace.function or ("default",) * len(trace)
    gpus = trace.gpu_type or (gpu_type,) * len(trace)
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("arrival_s,duration_s,function,gpu_type,priority\n")
        # labels repeat: each is made a CSV field once
        fields = {label: _field(label) for label in {*funcs, *gpus}}
        rows = zip(trace.arrival_s.tolist(), trace.duration_s.tolist(), funcs, gpus, strict=True)
        out.writelines(f"{a:.3f},{d:.3f},{fields[f]},{fields[g]},0\n" for a, d, f, g in rows)


def _field(text: str) -> str:
    """A CSV field: quoted where a label from an imported log holds a comma, quote or newline."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text
