"""Request logs in, as users have them: a CSV or JSON-lines file with one request per row, an
absolute time per request (ISO 8601 in any time zone, or epoch seconds) and either its run time
or its end time. `read_log` turns one into absolute arrival times and durations; errors name the
line, the column, and the flag or edit that fixes them (PlannerInputError, exit 2 in the CLI)."""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.trace import FloatArray

# Epoch seconds past this are far in the future (year 5138): such a number is milliseconds or
# microseconds, and read as seconds it would put the log millennia away.
_EPOCH_S_MAX = 1e11
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclass(frozen=True)
class LogColumns:
    """Which columns (CSV header names, JSON keys) hold what. One of duration and end is used:
    end, when named, wins."""

    time: str = "timestamp"
    duration: str | None = "duration_s"
    end: str | None = None
    function: str | None = None
    gpu_type: str | None = None


@dataclass(frozen=True)
class RowFilter:
    """Keep only rows whose `column` is one of `values` (`--keep predict_status=SUCCEED,FAILED`)."""

    column: str
    values: frozenset[str]

    @classmethod
    def parse(cls, text: str) -> RowFilter:
        column, sep, values = text.partition("=")
        kept = frozenset(v.strip() for v in values.split(",") if v.strip())
        if not sep or not column.strip() or not kept:
            raise LogError(f"--keep: cannot parse {text!r}; write COLUMN=VALUE[,VALUE...]")
        return cls(column.strip(), kept)


@dataclass(frozen=True)
class TimeReading:
    """How a time cell is read: `zone` for ISO times without an offset, `epoch_unit` (s, ms or
    us) for numbers."""

    zone: tzinfo = UTC
    epoch_unit: str = "s"


@dataclass(frozen=True)
class RequestLog:
    """Requests in file order. arrival_epoch_s: seconds since 1970-01-01 UTC; duration_s: run
    time, seconds. function, gpu_type: a label per request where the column was named."""

    arrival_epoch_s: FloatArray
    duration_s: FloatArray
    function: tuple[str, ...] | None
    gpu_type: tuple[str, ...] | None
    rows_read: int
    rows_dropped: int  # by the --keep filters

    def __len__(self) -> int:
        return len(self.arrival_epoch_s)


class LogError(PlannerInputError):
    """A request log the importer refuses; the message names the line, column and fix."""


def parse_zone(text: str) -> tzinfo:
    """`UTC`, an IANA name (`Asia/Shanghai`) or a fixed offset (`+08:00`, `-0530`)."""
    raw = text.strip()
    if raw.upper() in ("UTC", "Z"):
        return UTC
    if raw[:1] in "+-":
        digits = raw[1:].replace(":", "")
        if digits.isdigit() and len(digits) in (2, 4):
            hours, minutes = int(digits[:2]), int(digits[2:] or 0)
            if hours < 24 and minutes < 60:
                sign = -1 if raw[0] == "-" else 1
                return timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise LogError(
            f"--timezone: unknown zone {text!r}; write UTC, an offset like +08:00, or a name like "
            "Asia/Shanghai"
        ) from None


def parse_time(value: Any, reading: TimeReading) -> float:
    """Epoch seconds of one cell: a number (epoch in `reading.epoch_unit`) or ISO 8601 text.
    Raises ValueError with what is wrong (the caller adds where)."""
    if isinstance(value, bool):
        raise ValueError("is not a time")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value).strip()
        if not text:
            raise ValueError("is empty")
        try:
            number = float(text)
        except ValueError:
            return _iso_seconds(text, reading.zone)
    if not math.isfinite(number):
        raise ValueError("is not a finite number")
    seconds = number * _UNITS[reading.epoch_unit]
    if abs(seconds) > _EPOCH_S_MAX:
        raise ValueError(
            f"as epoch {reading.epoch_unit} is beyond the year 5000: milliseconds? "
            "pass --epoch-unit ms (or us)"
        )
    return seconds


def _iso_seconds(text: str, zone: tzinfo) -> float:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            "is neither ISO 8601 (2024-12-02T12:00:00+08:00, 2024-12-02 12:00:00Z) nor epoch seconds"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.timestamp()


def read_log(
    path: Path,
    columns: LogColumns,
    *,
    reading: TimeReading = TimeReading(),
    keep: Sequence[RowFilter] = (),
    fmt: str = "auto",
) -> RequestLog:
    """Read the log at `path` (fmt: csv, jsonl, or auto: JSON lines if the first non-blank
    character is `{`). A UTF-8 byte-order mark is skipped."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise LogError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        try:
            kind = fmt if fmt != "auto" else _sniff(handle)
            rows = _json_rows(handle, path) if kind == "jsonl" else _csv_rows(handle, path)
            return _collect(rows, path, columns, reading, keep)
        except UnicodeDecodeError as exc:
            raise LogError(
                f"{path}: not UTF-8 text (byte {exc.start}); save the log as UTF-8 (or CSV from a "
                "spreadsheet as 'CSV UTF-8')"
            ) from None


def _sniff(handle: Any) -> str:
    start = handle.read(4096)
    handle.seek(0)
    if start.startswith("\ufeff"):  # after a seek, utf-8-sig no longer skips the mark itself
        handle.read(1)
    return "jsonl" if start.lstrip("\ufeff \t\r\n").startswith("{") else "csv"


Row = tuple[int, Mapping[str, Any]]


@dataclass(frozen=True)
class _Rows:
    """A log's column names, where they were found (for messages), and its rows with their lines."""

    names: list[str]
    where: str
    rows: Iterator[Row]


def _csv_rows(handle: Any, path: Path) -> _Rows:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise LogError(f"{path} is empty: expected a header line naming the columns")
    names = [h.strip().lstrip("\ufeff") for h in header]

    def rows() -> Iterator[Row]:
        width = len(names)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            line = reader.line_num
            if len(row) != width:
                raise LogError(
                    f"{path} line {line}: {len(row)} fields, the header has {width}; "
                    "quote fields that contain commas"
                )
            yield line, dict(zip(names, row, strict=True))

    return _Rows(names, "line 1 (the header)", rows())


def _json_rows(handle: Any, path: Path) -> _Rows:
    def objects() -> Iterator[Row]:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise LogError(
                    f"{path} line {line}: not JSON ({exc.msg}); write one object per line"
                ) from None
            if not isinstance(obj, dict):
                raise LogError(
                    f"{path} line {line}: a JSON {type(obj).__name__}; expected one object per line"
                )
            yield line, obj

    found = objects()
    first = next(found, None)
    if first is None:
        raise LogError(f"{path} is empty: expected one JSON object per line")
    return _Rows(list(first[1]), f"line {first[0]} (the first object)", itertools.chain([first], found))


def _collect(
    log: _Rows,
    path: Path,
    columns: LogColumns,
    reading: TimeReading,
    keep: Sequence[RowFilter],
) -> RequestLog:
    use_end = columns.end is not None
    size_col = columns.end if use_end else columns.duration
    if size_col is None:
        raise LogError("name the run time: --duration-column NAME (seconds) or --end-column NAME (a time)")
    needed = {
        columns.time: "--time-column",
        size_col: "--end-column" if use_end else "--duration-column",
        **{f.column: "--keep" for f in keep},
    }
    optional = {
        c: flag
        for c, flag in ((columns.function, "--function-column"), (columns.gpu_type, "--gpu-type-column"))
        if c
    }
    arrivals: list[float] = []
    durations: list[float] = []
    functions: list[str] = []
    gpus: list[str] = []
    read = dropped = 0
    _check_columns(path, log.where, log.names, {**needed, **optional})
    for line, row in log.rows:
        read += 1
        if any(_text(_cell(row, f.column, path, line, "--keep")) not in f.values for f in keep):
            dropped += 1
            continue
        arrival = _time_cell(row, columns.time, "--time-column", path, line, reading)
        if use_end:
            ended = _time_cell(row, size_col, "--end-column", path, line, reading)
            duration = ended - arrival
            if duration < 0:
                raise LogError(
                    f"{path} line {line}: column {size_col!r} ends {-duration:g} s before column "
                    f"{columns.time!r} (the arrival); check the two columns and their time zones"
                )
        else:
            duration = _seconds_cell(row, size_col, path, line)
        arrivals.append(arrival)
        durations.append(duration)
        if columns.function:
            functions.append(_text(_cell(row, columns.function, path, line, "--function-column")))
        if columns.gpu_type:
            gpus.append(_text(_cell(row, columns.gpu_type, path, line, "--gpu-type-column")))
    return RequestLog(
        np.array(arrivals, dtype=np.float64),
        np.array(durations, dtype=np.float64),
        tuple(functions) if columns.function else None,
        tuple(gpus) if columns.gpu_type else None,
        rows_read=read,
        rows_dropped=dropped,
    )


def _check_columns(path: Path, where: str, found: list[str], wanted: Mapping[str, str]) -> None:
    for name, flag in wanted.items():
        if name not in found:
            shown = ", ".join(repr(f) for f in found[:20]) + (", ..." if len(found) > 20 else "")
            raise LogError(
                f"{path} {where}: no column {name!r} ({flag}); the columns are {shown}: name one with {flag}"
            )


def _cell(row: Mapping[str, Any], name: str, path: Path, line: int, flag: str) -> Any:
    try:
        return row[name]
    except KeyError:  # a JSON line without the key the first line had
        raise LogError(f"{path} line {line}: no {name!r} ({flag}) in this object") from None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _time_cell(
    row: Mapping[str, Any], name: str, flag: str, path: Path, line: int, reading: TimeReading
) -> float:
    value = _cell(row, name, path, line, flag)
    try:
        return parse_time(value, reading)
    except ValueError as exc:
        raise LogError(f"{path} line {line}: column {name!r} ({flag}): {_text(value)!r} {exc}") from None


def _seconds_cell(row: Mapping[str, Any], name: str, path: Path, line: int) -> float:
    value = _cell(row, name, path, line, "--duration-column")
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise LogError(
            f"{path} line {line}: column {name!r} (--duration-column): {_text(value)!r} is not a "
            "run time in seconds >= 0; drop such rows with --keep, or name an end time with --end-column"
        )
    return seconds
