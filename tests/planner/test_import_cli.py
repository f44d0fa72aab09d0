"""`eops plan import` through Typer's CliRunner: the documented GenTD26 command, a JSON-lines log
that `plan run` then replays, and bad input (exit 2, one line, no traceback)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elasticityops.cli.plan import app
from helpers.shared_traces import RAW_GENTD26, ROOT, SCALED_GENTD26, shared_trace

runner = CliRunner()


def documented_import() -> list[str]:
    """The GenTD26 import command as docs/planner.md shows it, without the leading `eops plan`."""
    text = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8")
    found = re.search(
        r"^eops plan import \.\./shared/traces/" + re.escape(RAW_GENTD26) + r"(?:.*\\\n)*.*$", text, re.M
    )
    assert found, "docs/planner.md shows no `eops plan import` of the raw GenTD26 file"
    return shlex.split(found.group(0).replace("\\\n", " "))[2:]


def test_the_documented_command_imports_the_raw_gentd26_file(tmp_path: Path) -> None:
    args = documented_import()
    args[1] = str(shared_trace(RAW_GENTD26))
    args[args.index("--out") + 1] = str(tmp_path / "t.csv")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "wrote 557,536 requests" in result.stdout
    assert "112 time-shifted copies" in result.stdout
    ours = (tmp_path / "t.csv").read_text(encoding="utf-8").splitlines()
    shared = shared_trace(SCALED_GENTD26).read_text(encoding="utf-8").splitlines()
    assert ours[0] == "arrival_s,duration_s,function,gpu_type,priority"
    same = [
        (float(a), float(b), c) == (float(x), float(y), z)
        for (a, b, c, *_), (x, y, z) in zip(
            (r.split(",") for r in ours[1:]), (r.split(",") for r in shared[1:]), strict=True
        )
    ]
    assert all(same)


def test_a_json_lines_log_in_another_zone_imports_and_runs(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    rows = [
        {"created": "2024-12-02T20:00:00+08:00", "finished": "2024-12-02T20:02:00+08:00", "gpu": "L4"},
        {"created": "2024-12-02 12:00:30Z", "finished": 1733140950, "gpu": "T4"},
    ]
    log.write_text("\ufeff" + "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "trace.csv"
    result = runner.invoke(
        app,
        [
            "import",
            str(log),
            "--time-column",
            "created",
            "--end-column",
            "finished",
            "--gpu-type-column",
            "gpu",
            "--from",
            "2024-12-02T11:59:00Z",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").splitlines()[1:] == [
        "60.000,120.000,default,L4,0",
        "90.000,120.000,default,T4,0",
    ]
    ran = runner.invoke(app, ["run", "--trace", str(out), "--provision-delay", "fixed:100"])
    assert ran.exit_code == 0, ran.output
    assert "2 requests" in ran.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(
            [], "no column 'timestamp' (--time-column); the columns are 'when', 'secs'", id="column"
        ),
        pytest.param(["--time-column", "when"], "no column 'duration_s' (--duration-column)", id="duration"),
        pytest.param(
            ["--time-column", "secs", "--duration-column", "secs", "--epoch-unit", "ms", "--to", "x"],
            "--to: 'x' is neither ISO 8601",
            id="bad-to",
        ),
        pytest.param(
            ["--time-column", "when", "--duration-column", "secs"],
            "line 3: column 'when' (--time-column): 'soon' is neither ISO 8601",
            id="bad-time",
        ),
        pytest.param(["--timezone", "Nowhere/Land"], "--timezone: unknown zone", id="zone"),
        pytest.param(["--scale-method", "double"], "--scale-method: invalid value 'double'", id="method"),
        pytest.param(["--keep", "status"], "--keep: cannot parse 'status'", id="keep"),
        pytest.param(["--scale-to", "0"], "--scale-to", id="scale-zero"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    log = tmp_path / "log.csv"
    log.write_text("\ufeffwhen,secs\n2024-12-02T12:00:00Z,5\nsoon,5\n", encoding="utf-8")
    result = runner.invoke(app, ["import", str(log), "--out", str(tmp_path / "t.csv"), *args])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_import_help_names_every_flag() -> None:
    result = runner.invoke(app, ["import", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--time-column", "--end-column", "--from", "--to", "--scale-to", "--scale-method", "--keep"):
        assert flag in result.output


@pytest.mark.timeout(60)  # before: 1.7e9 s of 10 s loops under predictive, hours
def test_run_on_an_epoch_timed_trace_with_a_bom_says_what_it_did(tmp_path: Path) -> None:
    trace = tmp_path / "epoch.csv"
    trace.write_text(
        "\ufeffarrival_s,duration_s\n1733140800,30\n1733140900,60\n1733150000,10\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["run", "--trace", str(trace), "--policy", "predictive", "--out", str(out), "--no-plots"]
    )
    assert result.exit_code == 0, result.output
    assert "3 requests over 2.6 h" in result.stdout
    assert "counted from the first arrival (2024-12-02T12:00:00Z)" in " ".join(result.stderr.split())
    notes = json.loads((out / "summary.json").read_text())["notes"]
    assert any("epoch times" in n for n in notes)
