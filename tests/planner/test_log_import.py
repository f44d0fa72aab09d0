"""Request logs to traces (planner/log_import.py, planner/log_scaling.py): times in any zone and
format, BOMs, filters, end-time columns, the errors, and the scaling of a window."""

from __future__ import annotations

import csv
from datetime import UTC, timedelta
from pathlib import Path

import numpy as np
import pytest

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.log_import import (
    LogColumns,
    RequestLog,
    RowFilter,
    TimeReading,
    parse_time,
    parse_zone,
    read_log,
)
from elasticityops.planner.log_scaling import Scaling, offered_mean, to_trace
from helpers.shared_traces import RAW_GENTD26, SCALED_GENTD26, shared_trace

EPOCH = 1_733_140_800.0  # 2024-12-02T12:00:00Z
GENTD26 = LogColumns(time="gmt_create", duration="exec_time_seconds", function="predict_type")


def write(tmp_path: Path, text: str, name: str = "log.csv", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding=encoding)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "2024-12-02T12:00:00Z",
        "2024-12-02T12:00:00+00:00",
        "2024-12-02 20:00:00+08:00",
        "2024-12-02T06:30:00-05:30",
        "2024-12-02T12:00:00.000Z",
        "20241202T120000Z",
        "1733140800",
        "1733140800.0",
    ],
)
def test_one_instant_in_every_notation(text: str) -> None:
    assert parse_time(text, TimeReading()) == EPOCH


def test_times_without_offset_are_in_the_given_zone() -> None:
    assert parse_time("2024-12-02 20:00:00", TimeReading(parse_zone("Asia/Shanghai"))) == EPOCH
    assert parse_time("2024-12-02 20:00:00", TimeReading(parse_zone("+08:00"))) == EPOCH
    assert parse_time("2024-12-02 12:00:00", TimeReading(parse_zone("UTC"))) == EPOCH
    # an offset in the text wins over the zone
    assert parse_time("2024-12-02T12:00:00Z", TimeReading(parse_zone("Asia/Shanghai"))) == EPOCH


def test_zone_spellings() -> None:
    assert parse_zone("-0530").utcoffset(None) == -timedelta(hours=5, minutes=30)
    assert parse_zone("utc") is UTC
    with pytest.raises(PlannerInputError, match="--timezone: unknown zone 'Mars/Base'"):
        parse_zone("Mars/Base")


def test_epoch_milliseconds_are_refused_as_seconds_and_read_with_the_unit() -> None:
    with pytest.raises(ValueError, match="--epoch-unit ms"):
        parse_time("1733140800000", TimeReading())
    assert parse_time("1733140800000", TimeReading(epoch_unit="ms")) == EPOCH
    assert parse_time(1733140800000000, TimeReading(epoch_unit="us")) == EPOCH


def test_csv_with_a_bom_and_quoted_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufefftimestamp,duration_s,fn,gpu\n"
        '2024-12-02T12:00:10Z,5,"a,b",L4\n'
        "\n"
        "2024-12-02T12:00:00Z,2.5,c,T4\n",
    )
    log = read_log(path, LogColumns(function="fn", gpu_type="gpu"))
    assert log.arrival_epoch_s.tolist() == [EPOCH + 10, EPOCH]
    assert log.duration_s.tolist() == [5.0, 2.5]
    assert log.function == ("a,b", "c")
    assert log.gpu_type == ("L4", "T4")


def test_json_lines_with_numbers_strings_and_a_bom(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '\ufeff{"ts": 1733140800, "end": "2024-12-02T12:01:00Z", "fn": "f"}\n'
        "\n"
        '{"ts": "2024-12-02T20:00:30+08:00", "end": 1733140900.5, "fn": "g"}\n',
        name="log.jsonl",
    )
    log = read_log(path, LogColumns(time="ts", end="end", function="fn"))
    assert log.arrival_epoch_s.tolist() == [EPOCH, EPOCH + 30]
    assert log.duration_s.tolist() == [60.0, 70.5]
    assert log.function == ("f", "g")


def test_keep_filters_rows_before_their_cells_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "timestamp,duration_s,status\n0,1,ok\n5,,pending\n9,2,failed\n")
    log = read_log(path, LogColumns(), keep=[RowFilter.parse("status=ok, failed")])
    assert log.arrival_epoch_s.tolist() == [0.0, 9.0]
    assert (log.rows_read, log.rows_dropped) == (3, 1)


@pytest.mark.parametrize(
    ("text", "columns", "message"),
    [
        pytest.param(
            "time,duration_s\n0,1\n",
            LogColumns(),
            "line 1 (the header): no column 'timestamp' (--time-column); the columns are 'time', "
            "'duration_s': name one with --time-column",
            id="missing-time-column",
        ),
        pytest.param(
            "\ufefftimestamp,secs\n0,1\n",
            LogColumns(),
            "no column 'duration_s' (--duration-column); the columns are 'timestamp', 'secs'",
            id="missing-duration-column-after-bom",
        ),
        pytest.param(
            "timestamp,duration_s\n0,1\nyesterday,1\n",
            LogColumns(),
            "line 3: column 'timestamp' (--time-column): 'yesterday' is neither ISO 8601",
            id="not-a-time",
        ),
        pytest.param(
            "timestamp,duration_s\n0,1\n1,-3\n",
            LogColumns(),
            "line 3: column 'duration_s' (--duration-column): '-3' is not a run time in seconds >= 0",
            id="negative-duration",
        ),
        pytest.param(
            "timestamp,done\n100,50\n",
            LogColumns(end="done"),
            "line 2: column 'done' ends 50 s before column 'timestamp'",
            id="end-before-start",
        ),
        pytest.param(
            "timestamp,duration_s\n0,1\n1,2,3\n",
            LogColumns(),
            "line 3: 3 fields, the header has 2",
            id="wide",
        ),
        pytest.param("", LogColumns(), "is empty", id="empty"),
        pytest.param(
            '{"timestamp": 0, "duration_s": 1}\n{"timestamp": 1}\n',
            LogColumns(),
            "line 2: no 'duration_s' (--duration-column) in this object",
            id="json-missing-key",
        ),
        pytest.param(
            '{"timestamp": 0, "duration_s": 1}\n{"timestamp": 1,\n',
            LogColumns(),
            "line 2: not JSON",
            id="json-broken",
        ),
    ],
)
def test_bad_logs_name_line_column_and_fix(
    tmp_path: Path, text: str, columns: LogColumns, message: str
) -> None:
    with pytest.raises(PlannerInputError) as info:
        read_log(write(tmp_path, text), columns)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_log_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes("timestamp,duration_s,f\n0,1,caf\u00e9\n".encode("latin-1"))
    with pytest.raises(PlannerInputError, match="not UTF-8 text"):
        read_log(path, LogColumns())


def log_of(arrivals: list[float], durations: list[float]) -> RequestLog:
    return RequestLog(np.array(arrivals), np.array(durations), None, None, len(arrivals), 0)


def test_window_counts_from_its_start_and_drops_what_is_outside() -> None:
    made = to_trace(
        log_of([EPOCH - 5, EPOCH, EPOCH + 7, EPOCH + 20], [1, 2, 3, 4]),
        start_epoch_s=EPOCH,
        end_epoch_s=EPOCH + 20,
    )
    assert made.trace.arrival_s.tolist() == [0.0, 7.0]
    assert made.trace.duration_s.tolist() == [2.0, 3.0]
    assert made.mean_before == pytest.approx(5 / 20)


def test_without_a_window_the_first_arrival_is_zero_and_the_last_is_kept() -> None:
    made = to_trace(log_of([EPOCH + 9, EPOCH, EPOCH + 3], [1, 2, 3]))
    assert made.trace.arrival_s.tolist() == [0.0, 3.0, 9.0]
    assert made.trace.duration_s.tolist() == [2.0, 3.0, 1.0]


def test_thinning_is_seeded_and_reaches_the_target() -> None:
    rng = np.random.default_rng(1)
    log = log_of(
        sorted((EPOCH + rng.uniform(0, 86_400, 20_000)).tolist()), rng.exponential(60, 20_000).tolist()
    )
    before = to_trace(log).mean_before
    one = to_trace(log, scaling=Scaling(before / 4, seed=3))
    two = to_trace(log, scaling=Scaling(before / 4, seed=3))
    assert one.kept_share == pytest.approx(0.25)
    assert one.mean_after == pytest.approx(before / 4, rel=0.05)
    assert np.array_equal(one.trace.arrival_s, two.trace.arrival_s)
    assert not np.array_equal(
        one.trace.arrival_s, to_trace(log, scaling=Scaling(before / 4, seed=4)).trace.arrival_s
    )


def test_superposing_keeps_each_copy_whole_and_inside_the_window() -> None:
    log = log_of([EPOCH + 100, EPOCH + 110, EPOCH + 500], [10, 10, 10])
    made = to_trace(
        log, start_epoch_s=EPOCH, end_epoch_s=EPOCH + 600, scaling=Scaling(0.05 * 8, "superpose", 60, seed=2)
    )
    assert made.copies == 8
    arrivals = made.trace.arrival_s
    assert np.all((arrivals >= 0) & (arrivals < 600))
    assert len(arrivals) == 24
    # every copy is the original shifted as a whole by one whole number of seconds within +-60 s
    early, late = arrivals[arrivals < 300], arrivals[arrivals >= 300]
    assert len(early) == 16
    assert len(late) == 8
    assert np.all((late >= 440) & (late <= 560))
    assert np.all(late == np.round(late))
    assert sorted(early.tolist()) == sorted([*(late - 400).tolist(), *(late - 390).tolist()])


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        (Scaling(10.0, "thin"), "--scale-method thin: the target 10 is above"),
        (Scaling(0.001, "superpose"), "use --scale-method thin"),
    ],
)
def test_impossible_scalings_are_refused(scaling: Scaling, message: str) -> None:
    with pytest.raises(PlannerInputError, match=message):
        to_trace(log_of([EPOCH, EPOCH + 100], [10, 10]), scaling=scaling)


def test_a_window_without_requests_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="no request arrives between --from and --to"):
        to_trace(log_of([EPOCH], [1]), start_epoch_s=EPOCH + 10, end_epoch_s=EPOCH + 20)


def test_the_raw_gentd26_file_gives_the_shared_scaled_window() -> None:
    """The README's method, applied to the raw file by the importer, gives the shared file."""
    log = read_log(
        shared_trace(RAW_GENTD26), GENTD26, keep=[RowFilter.parse("predict_status=SUCCEED,FAILED")]
    )
    assert (log.rows_read, log.rows_dropped) == (26_823, 33)
    made = to_trace(log, start_epoch_s=EPOCH, end_epoch_s=EPOCH + 2 * 86_400, scaling=Scaling(100.0, seed=0))
    assert made.copies == 112
    with shared_trace(SCALED_GENTD26).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    assert len(made.trace) == len(rows) == 557_536
    assert made.trace.arrival_s.tolist() == [float(r[0]) for r in rows]
    assert made.trace.duration_s.tolist() == [float(r[1]) for r in rows]
    assert made.trace.function == tuple(r[2] for r in rows)
    assert made.mean_after == pytest.approx(offered_mean(made.trace.duration_s, 2 * 86_400))
    assert made.mean_after == pytest.approx(100.3, abs=0.1)
