"""`eops invoke NAME --batch FILE`, `eops batch show|cancel` and `eops ls --batch` against a real
gateway running real processes."""

from __future__ import annotations

import json
import re

import pytest

from elasticityops.client import Client
from helpers.server import RunningServer

from .runner import Eops, Writer

DOUBLE = (
    "import json, os, sys; p = json.load(open(os.environ['EOPS_PAYLOAD_PATH'])); "
    "p['n'] < 0 and sys.exit(3); "
    "open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps(p['n'] * 2))"
)
SLEEP = "import time; time.sleep(120)"


@pytest.fixture(scope="module")
def functions(server: RunningServer) -> None:
    with Client(server.url, server.token) as client:
        client.deploy_function({"name": "cli-double", "command": ["python", "-c", DOUBLE]})
        client.deploy_function(
            {"name": "cli-nap", "command": ["python", "-c", SLEEP], "timeout_seconds": 300}
        )


def test_a_batch_file_runs_once_per_line_with_results_in_input_order(
    eops_process: Eops, functions: None, write: Writer
) -> None:
    eops = eops_process  # the batch family's real-process test (runner.py)
    inputs = write("in.jsonl", "\n".join(json.dumps({"n": n}) for n in (4, 1, 3)) + "\n\n")
    out = inputs.with_name("out.jsonl")
    result = eops("invoke", "cli-double", "--batch", str(inputs), "--out", str(out))
    assert result.code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [
        {"input": 0, "state": "succeeded", "result": 8},
        {"input": 1, "state": "succeeded", "result": 2},
        {"input": 2, "state": "succeeded", "result": 6},
    ]
    assert "3 succeeded, 0 did not" in result.stderr
    assert "3/3 ended" in result.stderr, "progress, a line at each tenth off a terminal"


def test_a_failed_input_is_a_line_of_its_own_and_exit_1(eops: Eops, functions: None, write: Writer) -> None:
    inputs = write("mixed.jsonl", '{"n": 2}\n{"n": -1}\n')
    result = eops("invoke", "cli-double", "--batch", str(inputs))
    assert result.code == 1, result.output
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert first == {"input": 0, "state": "succeeded", "result": 4}
    assert (second["input"], second["state"]) == (1, "failed")
    assert second["id"].startswith("inv-")
    assert "exit code 3" in second["error"]


@pytest.mark.parametrize(
    ("text", "args", "field"),
    [
        ('{"n": 1}\n{"n": \n', (), "in.jsonl:2"),
        ("\n\n", (), "--batch"),
        ('{"n": 1}\n', ("--data", "{}"), "--data"),
        ('{"n": 1}\n', ("--wait",), "--wait/--timeout"),
    ],
)
def test_bad_batch_input_exits_2_naming_it_and_sends_nothing(
    eops: Eops, functions: None, write: Writer, api: Client, text: str, args: tuple[str, ...], field: str
) -> None:
    before = len(api.list_invocations(function="cli-double", limit=500).items)
    result = eops("invoke", "cli-double", "--batch", str(write("in.jsonl", text)), *args)
    assert result.code == 2, result.output
    assert field in result.stderr
    assert "Traceback" not in result.output
    assert len(api.list_invocations(function="cli-double", limit=500).items) == before
    missing = eops("invoke", "cli-double", "--batch", "/nonexistent/in.jsonl")
    assert missing.code == 2
    assert "--batch" in missing.stderr


def test_batch_show_and_cancel(eops: Eops, functions: None, api: Client) -> None:
    batch = api.spawn_map("cli-nap", [{}, {}, {}])
    shown = eops("batch", "show", batch.id)
    assert shown.code == 0, shown.output
    assert re.search(rf"{batch.id}\s+cli-nap\s+3 invocations", shown.stdout)
    cancelled = eops("batch", "cancel", batch.id, "--json")
    assert cancelled.code == 0, cancelled.output
    assert json.loads(cancelled.stdout)["counts"]["cancelled"] == 3
    listed = eops("ls", "--batch", batch.id, "--json")
    assert {i["id"] for i in json.loads(listed.stdout)["items"]} == set(batch.invocation_ids)
    unknown = eops("batch", "show", "bat-nosuchbatch")
    assert unknown.code == 1
    assert "no batch" in unknown.stderr
