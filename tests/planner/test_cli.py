"""`eops plan` through Typer's CliRunner: outputs, config files, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elasticityops.cli.plan import app
from elasticityops.knobs import specs
from elasticityops.planner.config import SEARCHED, CommonOptions, RecommendOptions, RunOptions, read_inputs
from elasticityops.planner.settings import ClusterSettings
from helpers.cli_help import option_rows

runner = CliRunner()
SMALL = [
    "--days",
    "0.25",
    "--seed",
    "2",
    "--bursts-per-day",
    "8",
    "--burst-peak-min",
    "150",
    "--burst-peak-max",
    "250",
    "--burst-ramp",
    "120",
    "--burst-duration",
    "300",
]


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    result = runner.invoke(app, ["trace", "--out", str(path), *SMALL])
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("command", [[], ["run"], ["trace"], ["recommend"]])
def test_help_everywhere(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_run_writes_summary_invocations_plots_and_html(small_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "run",
            "--trace",
            str(small_trace),
            "--policy",
            "warm:5",
            "--provision-delay",
            "fixed:120",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "p95 wait" in result.output
    summary = json.loads((out / "summary.json").read_text())
    for key in ("p50", "p95", "p99", "max", "mean"):
        assert key in summary["time_to_start_s"]
    for key in (
        "waited_share",
        "node_hours_billed",
        "busy_gpu_hours",
        "idle_gpu_hours",
        "cost_usd",
        "peak_nodes",
        "quota_hits",
    ):
        assert key in summary
    assert summary["settings"]["provision-delay"] == "fixed:120"
    rows = (out / "invocations.csv").read_text().splitlines()
    assert rows[0] == "arrival_s,start_s,end_s,wait_s,node,restarts"
    assert len(rows) - 1 == summary["requests"] == len(small_trace.read_text().splitlines()) - 1
    first = rows[1].split(",")
    assert float(first[1]) >= float(first[0])
    for png in ("demand.png", "wait_cdf.png", "cost_vs_wait.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3
    assert 'src="http' not in html


def test_plain_plan_with_options_means_run_and_compares_policies(small_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = runner.invoke(
        app,
        [
            "--trace",
            str(small_trace),
            "--policy",
            "none",
            "--policy",
            "predictive",
            "--out",
            str(out),
            "--no-plots",
        ],
    )
    assert result.exit_code == 0, result.output
    runs = json.loads((out / "summary.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == ["none", "predictive:10"]
    assert (out / "invocations-predictive_10.csv").exists()
    assert not (out / "report.html").exists()


def test_config_keys_are_flag_names_and_flags_win(small_trace: Path, tmp_path: Path) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text(
        f"trace: {small_trace}\nbaseline: 3\nmax-nodes: 40\nscale_down_after: 120\n"
        "policy: [static]\nspot: true\n"
    )
    out = tmp_path / "cfg"
    result = runner.invoke(
        app, ["run", "--config", str(config), "--max-nodes", "50", "--out", str(out), "--no-plots"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "static:3"
    assert summary["settings"]["baseline"] == 3
    assert summary["settings"]["max-nodes"] == 50
    assert summary["settings"]["scale-down-after"] == 120.0
    assert summary["price_per_node_hour"] == 0.24


def test_recommend_finds_setting_and_quota(small_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    result = runner.invoke(
        app,
        [
            "recommend",
            "--trace",
            str(small_trace),
            "--p95-wait",
            "10",
            "--windows",
            "600",
            "--out",
            str(out),
            "--provision-delay",
            "fixed:120",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "GPU quota to request" in result.output
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["met"] is True
    best = rec["recommended"]
    assert best["time_to_start_s"]["p95"] <= 10.0
    cheaper_ok = [
        c
        for c in rec["evaluated"]
        if c["time_to_start_s"]["p95"] <= 10.0 and c["cost_usd"] < best["cost_usd"]
    ]
    assert cheaper_ok == []
    assert rec["quota_gpus"] >= best["peak_nodes"]
    costs = [c["cost_usd"] for c in rec["frontier"]]
    assert costs == sorted(costs, reverse=True)
    assert (out / "frontier.png").exists()
    assert (out / "report.html").exists()


def _bad(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["run"], "--trace is required", id="no-trace"),
        pytest.param(["run", "--trace", "{missing}"], "cannot read", id="missing-file"),
        pytest.param(
            ["run", "--trace", "{cols}"], "line 1: missing column(s) duration_s", id="missing-column"
        ),
        pytest.param(["run", "--trace", "{nonnum}"], "line 3: arrival_s 'soon'", id="non-numeric"),
        pytest.param(["run", "--trace", "{neg}"], "line 2: arrival_s '-1'", id="negative"),
        pytest.param(["run", "--trace", "{empty}"], "no rows", id="empty"),
        pytest.param(["run", "--trace", "{unsorted}", "--strict-order"], "line 3", id="unsorted-refused"),
        pytest.param(
            ["run", "--trace", "{good}", "--provision-delay", "lognormal:median=oops"],
            "--provision-delay",
            id="bad-distribution",
        ),
        pytest.param(["run", "--trace", "{good}", "--policy", "warm:lots"], "--policy", id="bad-policy"),
        pytest.param(
            ["run", "--trace", "{good}", "--baseline", "5", "--max-nodes", "2"],
            "--max-nodes",
            id="quota-below-baseline",
        ),
        pytest.param(
            ["run", "--trace", "{good}", "--config", "{badcfg}"],
            "unknown key 'scale-down'",
            id="unknown-config-key",
        ),
        pytest.param(
            ["run", "--trace", "{good}", "--config", "{badval}"],
            "--baseline: invalid value",
            id="bad-config-value",
        ),
        pytest.param(["recommend", "--trace", "{good}", "--windows", "a,b"], "--windows", id="bad-windows"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    files = {
        "missing": tmp_path / "missing.csv",
        "cols": _bad(tmp_path, "cols.csv", "arrival_s\n1\n"),
        "nonnum": _bad(tmp_path, "nonnum.csv", "arrival_s,duration_s\n0,1\nsoon,1\n"),
        "neg": _bad(tmp_path, "neg.csv", "arrival_s,duration_s\n-1,1\n"),
        "empty": _bad(tmp_path, "empty.csv", "arrival_s,duration_s\n"),
        "unsorted": _bad(tmp_path, "unsorted.csv", "arrival_s,duration_s\n5,1\n1,1\n"),
        "good": _bad(tmp_path, "good.csv", "arrival_s,duration_s\n0,10\n"),
        "badcfg": _bad(tmp_path, "bad.yaml", "scale-down: 10\n"),
        "badval": _bad(tmp_path, "badval.yaml", "baseline: lots\n"),
    }
    result = runner.invoke(app, [a.format(**files) for a in args])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_unsorted_trace_is_sorted_with_a_note(tmp_path: Path) -> None:
    path = _bad(tmp_path, "u.csv", "arrival_s,duration_s\n5,1\n1,1\n")
    result = runner.invoke(app, ["run", "--trace", str(path)])
    assert result.exit_code == 0, result.output
    assert "sorted it" in result.stderr


def test_recommend_says_on_stderr_which_setting_it_simulates(small_trace: Path) -> None:
    """Not a terminal (a log, a pipe): a line as each setting starts, so a search of minutes
    shows where it is (issue 38); stdout keeps only the results."""
    result = runner.invoke(app, ["recommend", "--trace", str(small_trace), "--windows", "600"])
    assert result.exit_code == 0, result.output
    found = re.search(r"\((\d+) settings run\)", result.stdout)
    assert found, result.stdout
    steps = re.findall(r"^simulating (\d+)/(\d+): (.+) \(\S+ so far\)$", result.stderr, re.M)
    assert [int(k) for k, _, _ in steps] == list(range(1, int(found.group(1)) + 1)), result.stderr
    assert steps[0][2] == "none sd=600s"  # the search starts without warm capacity
    assert all(int(total) >= len(steps) for _, total, _ in steps)
    assert "simulating" not in result.stdout


def test_run_says_on_stderr_which_policy_it_simulates(small_trace: Path) -> None:
    args = ["run", "--trace", str(small_trace), "--policy", "none", "--policy", "warm:5"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    steps = re.findall(r"^simulating (\d+/\d+: \S+) \(\S+ so far\)$", result.stderr, re.M)
    assert steps == ["1/2: none", "2/2: warm:5"], result.stderr


def test_recommend_table_shows_each_setting_whole_at_80_columns(small_trace: Path) -> None:
    """80 columns is what a pipe gets: the setting is what the reader looks for (issue 38)."""
    args = [
        "recommend",
        "--trace",
        str(small_trace),
        "--windows",
        "300,600",
        "--provision-delay",
        "fixed:120",
    ]
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ ")]
    settings = [line.split("│")[1].strip() for line in rows]
    assert settings, result.stdout
    assert all(re.fullmatch(r"(none|baseline:\d+|warm:\d+|predictive:\S+) sd=\d+s", s) for s in settings), (
        rows
    )


def test_run_table_shows_each_policy_whole_at_80_columns(small_trace: Path) -> None:
    policies = ["none", "warm:5", "predictive:10", "scheduled:08:00=5", "predictive-rate"]
    args = ["run", "--trace", str(small_trace), *(a for p in policies for a in ("--policy", p))]
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_bad_flag_type_is_a_usage_error() -> None:
    result = runner.invoke(app, ["run", "--baseline", "many"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("command", "kinds", "left_out"),
    [
        ("run", (ClusterSettings, CommonOptions, RunOptions), ()),
        ("recommend", (ClusterSettings, CommonOptions, RecommendOptions), SEARCHED),
    ],
)
def test_help_shows_every_knob_and_its_default(
    command: str, kinds: tuple[type, ...], left_out: tuple[str, ...]
) -> None:
    """Both commands take the shared knobs, declared once; each option shows its default."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    rows = option_rows(result.output)
    for kind in kinds:
        for knob in specs(kind):
            if knob.name in left_out:
                assert knob.flag not in rows, f"{command} searches {knob.flag}"
                continue
            row = rows[knob.flag]
            if knob.is_bool:
                shown = knob.off_flag if knob.off_flag and not knob.default else None
                assert shown is None or f"[default: {shown.removeprefix('--')}]" in row, row
            else:
                assert f"[default: {knob.default_text}]" in row, row
    narrow = runner.invoke(app, [command, "--help"], env={"COLUMNS": "100"}).output
    assert "[default: 600]" in narrow if command == "run" else "[default: 300,600,1200]" in narrow
    assert "[default: lognormal:median=240,p95=420]" in narrow
    assert "…" not in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 100


def test_every_knob_is_a_config_key(tmp_path: Path) -> None:
    """A config file may set each knob by its flag name; values there are typed like flags."""
    sample = {
        "baseline": 3,
        "max-nodes": 40,
        "spot": "yes",
        "provision-delay": "fixed:60",
        "policy": "static",
    }
    lines = [f"{k}: {v}" for k, v in sample.items()]
    for knob in [*specs(ClusterSettings), *specs(CommonOptions), *specs(RunOptions)]:
        if knob.name not in sample and knob.name != "trace":
            lines.append(
                f"{knob.name.replace('-', '_')}: {knob.default_text if not knob.is_bool else 'false'}"
            )
    config = tmp_path / "all.yaml"
    config.write_text(
        "\n".join(line for line in lines if "none," not in line and "by --spot" not in line) + "\n"
    )
    settings, common, options = read_inputs({"max-nodes": "50"}, config, RunOptions)
    assert (settings.baseline, settings.max_nodes, settings.spot) == (3, 50, True)
    assert str(settings.provision_delay) == "fixed:60"
    assert options.policy == ("static",)
    assert common.no_plots is False
    defaults = ClusterSettings()
    assert settings.scale_down_after_s == defaults.scale_down_after_s
    assert settings.seed == defaults.seed


@pytest.mark.parametrize("command", ["run", "recommend"])
def test_an_out_that_cannot_be_written_is_refused_before_the_run(
    small_trace: Path, tmp_path: Path, command: str
) -> None:
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0::/root:/bin/sh\n")
    result = runner.invoke(app, [command, "--trace", str(small_trace), "--out", str(a_file)])
    assert result.exit_code == 2, result.output
    assert f"--out: {a_file} is a file, not a directory" in result.stderr
    assert "Traceback" not in result.output
    assert "requests over" not in result.output, "nothing ran"
    assert a_file.read_text() == "root:x:0:0::/root:/bin/sh\n"
