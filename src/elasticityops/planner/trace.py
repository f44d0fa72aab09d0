"""Traces in and out: a CSV with a header and at least `arrival_s,duration_s` (seconds from the
trace start); optional `function`, `gpu_type`, `priority` are carried through but not modelled.
Validation errors name the line (the header is line 1) and exit the CLI with code 2. A UTF-8
byte-order mark is skipped; a first arrival so late that it can only be an absolute (epoch) time
is moved to 0, with a note."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from elasticityops.planner.errors import PlannerInputError

REQUIRED = ("arrival_s", "duration_s")
# A first arrival past this (3.2 years in) is an epoch time: every epoch second since 1973 is.
EPOCH_LIKE_S = 1e8
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
    """What loading changed: how many rows were out of order (and were sorted), first such line;
    seconds taken off every arrival because the first was an epoch time (0: none)."""

    unsorted_rows: int = 0
    first_unsorted_line: int = 0
    shifted_by_s: float = 0.0

    def shift_note(self) -> str | None:
        """What the move of an epoch-timed trace did, for the user; None if there was none."""
        if not self.shifted_by_s:
            return None
        first = datetime.fromtimestamp(self.shifted_by_s, UTC).isoformat().replace("+00:00", "Z")
        return (
            f"arrival_s holds epoch times, not seconds from the trace start: counted from the "
            f"first arrival ({first}) instead, every arrival less {self.shifted_by_s:,.3f} s; "
            "`eops plan import` reads absolute logs and can start the trace elsewhere (--from)"
        )


def load_trace(path: Path, *, on_unsorted: str = "sort") -> tuple[Trace, LoadNotes]:
    """Read and validate a trace CSV. on_unsorted: "sort" (sort and report) or "refuse"."""
    arrivals, durations, functions = _read_rows(path)
    if not arrivals:
        raise PlannerInputError(f"--trace: {path} has a header but no rows")
    arr = _column(arrivals, "arrival_s", path)
    dur = _column(durations, "duration_s", path)
    order_breaks = np.flatnonzero(np.diff(arr) < 0)
    funcs = tuple(functions) if functions else None
    notes = LoadNotes()
    if len(order_breaks):
        first_line = int(order_breaks[0]) + 3  # the later row of the first decreasing pair
        if on_unsorted == "refuse":
            raise PlannerInputError(
                f"--trace: {path} line {first_line}: arrival_s goes backwards "
                f"({arr[first_line - 3]:g} then {arr[first_line - 2]:g}); "
                "sort the trace or drop --strict-order"
            )
        order = np.argsort(arr, kind="stable")
        funcs = tuple(functions[k] for k in order.tolist()) if functions else None
        arr, dur = arr[order], dur[order]
        notes = LoadNotes(unsorted_rows=len(order_breaks), first_unsorted_line=first_line)
    if arr[0] >= EPOCH_LIKE_S:
        # Simulated time costs loops and timeline samples: 1.7e9 s of nothing before the first
        # request would take minutes (and bill a baseline or warm pool for 55 years). The first
        # arrival becomes 0, as `eops plan import` makes it without --from.
        shift = float(arr[0])
        arr = arr - shift
        notes = replace(notes, shifted_by_s=shift)
    return Trace(arr, dur, funcs), notes


def _read_rows(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The arrival, duration and (if the header has it) function column as text, blank rows
    skipped; a missing column or a row of the wrong width is refused naming its line."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")  # -sig: a BOM is no part of a name
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
            # repr, so that a name with an invisible character (a stray BOM, a no-break space)
            # shows why it does not match
            raise PlannerInputError(
                f"--trace: {path} line 1: missing column(s) {', '.join(missing)}; found "
                f"{', '.join(repr(n) for n in names)}; the header needs arrival_s,duration_s"
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
