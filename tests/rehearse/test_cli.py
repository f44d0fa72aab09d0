"""`eops rehearse` as a user runs it: --help, and each refusal before anything starts (one line
naming the flag and the fix, exit 2, no traceback). No cluster is needed for any of these."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.eops_in_process import run_eops
from helpers.server import EOPS, REPO, base_env

TRACE = "arrival_s,duration_s\n0,30\n5,20\n12,40\n"


def eops(
    *args: str, env: dict[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`eops rehearse ARGS`: its entry point in this pytest (tests/helpers/eops_in_process.py),
    or a real process when `process` (test_help_lists_the_flags: the family's one)."""
    argv = [EOPS, "rehearse", *args]
    if process:
        return subprocess.run(
            argv, capture_output=True, text=True, env=base_env(env), cwd=REPO, timeout=120, check=False
        )
    return subprocess.CompletedProcess(argv, *run_eops(argv[1:], base_env(env), REPO))


def test_help_lists_the_flags() -> None:
    done = eops("--help", env={"COLUMNS": "200"}, process=True)
    assert done.returncode == 0, done.stderr
    for flag in ("--trace", "--out", "--kubeconfig", "--headroom", "--namespace-prefix", "--settle-timeout"):
        assert flag in done.stdout


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival,duration_s\n0,30\n")
    afile = tmp_path / "a-file"
    afile.write_text("")
    return {"trace": trace, "bad": bad, "out": tmp_path / "out", "file": afile, "empty": tmp_path / "none"}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--trace", "{trace}", "--out", "{out}"],
            ["--kubeconfig", "no dev cluster is running", "eops dev-cluster up"],
        ),
        (["--trace", "{bad}", "--out", "{out}"], ["--trace", "line 1", "missing column(s) arrival_s"]),
        (["--trace", "{trace}", "--out", "{out}", "--headroom", "warm:lots"], ["--headroom", "warm:50"]),
        (["--trace", "{trace}", "--out", "{out}", "--headroom", "sometimes"], ["--headroom", "cannot parse"]),
        (
            ["--trace", "{trace}", "--out", "{out}", "--kubeconfig", "{empty}/kc"],
            ["--kubeconfig", "not a file"],
        ),
        (["--out", "{out}"], ["--trace", "is required", "eops plan trace"]),
        (
            ["--trace", "{trace}", "--out", "{out}", "--headroom", "none", "--headroom", "None"],
            ["--headroom", "given twice"],
        ),
        (["--trace", "{trace}", "--out", "{file}"], ["--out", "is a file"]),
        (
            ["--trace", "{trace}", "--out", "{out}", "--max-in-flight", "0"],
            ["--max-in-flight", "1 to 100000"],
        ),
        (["--trace", "{trace}", "--out", "{out}", "--warmup", "12.5"], ["--warmup", "no request to measure"]),
    ],
    ids=[
        "no-cluster",
        "bad-trace",
        "bad-warm",
        "bad-policy",
        "no-kubeconfig",
        "no-trace",
        "twice",
        "out-file",
        "bad-knob",
        "warmup",
    ],
)
def test_refusals(inputs: dict[str, Path], args: list[str], words: list[str]) -> None:
    filled = [a.format(**{k: str(v) for k, v in inputs.items()}) for a in args]
    done = eops(*filled, env={"EOPS_DEV_CLUSTER_DIR": str(inputs["empty"]), "COLUMNS": "300"})
    assert done.returncode == 2, done.stdout + done.stderr
    text = " ".join(done.stderr.split())
    for word in words:
        assert word in text, done.stderr
    assert "Traceback" not in done.stderr
    assert not (inputs["out"] / "summary.json").exists()
