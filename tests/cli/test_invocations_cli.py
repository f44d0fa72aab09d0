"""`eops invoke|status|logs|cancel|ls` against a real gateway running real processes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from elasticityops.client import Client
from elasticityops.domain.invocations import State
from helpers.server import REPO, RunningServer

from .runner import Eops, Writer

HELLO = str(REPO / "examples" / "hello.yaml")

# Forty lines of output, then what python says of a script it cannot find, and exit code 2.
STDERR_THEN_EXIT_2 = (
    "import sys\n"
    "for i in range(40):\n"
    "    print(f'step {i}', flush=True)\n"
    "print(\"python: can't open file '/elsewhere/work.py': [Errno 2] No such file or directory\","
    " file=sys.stderr)\n"
    "sys.exit(2)"
)


def spec(name: str, code: str, timeout: int = 120) -> str:
    return json.dumps({"name": name, "command": ["python", "-c", code], "timeout_seconds": timeout})


@pytest.fixture(scope="module")
def functions(server: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Deploys the functions these tests invoke, once (through the Python client: `eops fn
    deploy` has its own tests)."""
    root = tmp_path_factory.mktemp("specs")
    files = {
        "hello": Path(HELLO),
        "cli-fail": root / "fail.json",
        "cli-sleep": root / "sleep.json",
        "cli-chatty": root / "chatty.json",
        "cli-noop": root / "noop.json",
        "cli-stderr": root / "stderr.json",
    }
    files["cli-fail"].write_text(
        spec("cli-fail", "import sys; print('about to fail', flush=True); sys.exit(3)")
    )
    files["cli-sleep"].write_text(
        spec("cli-sleep", "import time; print('sleeping', flush=True); time.sleep(120)", timeout=300)
    )
    files["cli-chatty"].write_text(
        spec(
            "cli-chatty",
            "import time\nfor i in range(3):\n    print(f'line {i}', flush=True)\n    time.sleep(0.5)",
        )
    )
    files["cli-noop"].write_text(spec("cli-noop", "pass"))
    files["cli-stderr"].write_text(spec("cli-stderr", STDERR_THEN_EXIT_2))
    with Client(server.url, server.token) as client:
        for path in files.values():
            client.deploy_function(path)
    return {name: str(path) for name, path in files.items()}


@pytest.fixture
def deployed(eops: Eops, functions: dict[str, str]) -> Eops:
    """`eops`, with the functions above deployed."""
    return eops


@pytest.fixture
def deployed_process(eops_process: Eops, functions: dict[str, str]) -> Eops:
    """`eops` as a real subprocess, with the functions above deployed: the tests of invoke
    --wait, logs -f, cancel and status that run on a real process (runner.py)."""
    return eops_process


def test_invoke_without_wait_prints_only_the_id(deployed: Eops, api: Client) -> None:
    result = deployed("invoke", "hello", "--data", '{"name": "Ada"}')
    assert result.code == 0, result.output
    inv_id = result.stdout.strip()
    assert re.fullmatch(r"inv-[0-9a-z]+", inv_id)
    assert f"eops status {inv_id}" in result.stderr
    assert api.wait(inv_id, timeout=120).result["greeting"] == "hello, Ada!"


def test_invoke_wait_success_shows_result_and_timeline_exit_0(deployed_process: Eops) -> None:
    deployed = deployed_process
    result = deployed("invoke", "hello", "--data", '{"name": "Ada"}', "--wait")
    assert result.code == 0, result.output
    out = result.stdout
    assert re.search(r"inv-[0-9a-z]+\s+hello\s+succeeded", out)
    assert "exit code 0" in out
    for phase in ("queue", "capacity", "start", "run"):
        assert re.search(rf"^{phase}\s+\d+\.\d+s", out, re.MULTILINE), phase
    for milestone in ("accepted", "dispatched", "capacity ready", "started", "finished"):
        assert re.search(rf"^{milestone}\s+\d\d:\d\d:\d\d\.\d\d\d", out, re.MULTILINE), milestone
    assert '"greeting": "hello, Ada!"' in out
    assert "time to start" in out
    # Not a terminal: progress comes as one line per state instead of a spinner.
    assert re.search(r"^(queued|pending|running) \d+\.\ds: ", result.stderr, re.MULTILINE)


def test_invoke_data_from_file(deployed: Eops, write: Writer) -> None:
    payload = write("payload.json", '{"name": "Grace"}')
    result = deployed("invoke", "hello", "--data", f"@{payload}", "--wait", "--json")
    assert result.code == 0, result.output
    inv = json.loads(result.stdout)
    assert inv["state"] == "succeeded"
    assert inv["result"]["greeting"] == "hello, Grace!"


def test_invoke_wait_failure_exit_1_with_reason(deployed: Eops) -> None:
    result = deployed("invoke", "cli-fail", "--wait")
    assert result.code == 1, result.output
    assert re.search(r"cli-fail\s+failed", result.stdout)
    assert "exit code 3" in result.stdout
    assert "failure reason: exit_code" in result.stdout


def test_invoke_wait_failure_shows_the_end_of_its_output_and_how_to_read_all_of_it(
    deployed: Eops,
) -> None:
    result = deployed("invoke", "cli-stderr", "--wait")
    assert result.code == 1, result.output
    found = re.search(r"(inv-[0-9a-z]+)\s+cli-stderr\s+failed", result.stdout)
    assert found, result.stdout
    inv_id = found.group(1)
    for shown in (deployed("status", inv_id), result):
        lines = shown.stdout.splitlines()
        assert "exit code 2" in shown.stdout
        assert any("can't open file '/elsewhere/work.py'" in line for line in lines), shown.stdout
        assert any(line.strip() == "step 39" for line in lines), "the output's last lines are shown"
        assert not any(line.strip() == "step 0" for line in lines), "only its last lines"
        assert f"eops logs {inv_id}" in shown.stdout


def test_status_of_a_failed_invocation_as_json(deployed: Eops, api: Client) -> None:
    inv_id = deployed("invoke", "cli-fail").stdout.strip()
    api.wait(inv_id, timeout=120)
    result = deployed("status", inv_id, "--json")
    assert result.code == 0, result.output
    inv = json.loads(result.stdout)
    assert (inv["state"], inv["exit_code"], inv["failure_reason"]) == ("failed", 3, "exit_code")
    assert set(inv["durations"]) >= {"queue", "capacity", "start", "run"}


def test_wait_timeout_leaves_it_running_exit_1(deployed: Eops, api: Client) -> None:
    result = deployed("invoke", "cli-sleep", "--wait", "--timeout", "1", "--json")
    assert result.code == 1, result.output
    inv = json.loads(result.stdout)
    assert inv["state"] in ("queued", "pending", "running")
    assert "still" in result.stderr
    assert "it keeps going" in result.stderr
    api.cancel(inv["id"])


def test_logs_after_the_end_and_followed(deployed_process: Eops, api: Client) -> None:
    deployed = deployed_process
    inv_id = deployed("invoke", "cli-chatty").stdout.strip()
    followed = deployed("logs", inv_id, "-f")  # returns when the invocation ends
    assert followed.code == 0, followed.output
    assert followed.stdout.splitlines() == ["line 0", "line 1", "line 2"]
    assert api.get_invocation(inv_id).state is State.succeeded

    again = deployed("logs", inv_id)
    assert again.stdout == followed.stdout


def test_cancel_a_running_invocation(deployed_process: Eops, api: Client) -> None:
    deployed = deployed_process
    inv_id = deployed("invoke", "cli-sleep").stdout.strip()
    wait_for_state(api, inv_id, State.running)

    cancelled = deployed("cancel", inv_id)
    assert cancelled.code == 0, cancelled.output
    assert f"{inv_id}: cancelled" in cancelled.stdout

    status = deployed("status", inv_id)
    assert re.search(r"cli-sleep\s+cancelled", status.stdout)
    assert "failure reason: cancelled" in status.stdout

    assert deployed("cancel", inv_id).code == 0  # cancelling again is a no-op


def test_cancel_of_a_finished_invocation_is_refused(deployed: Eops, api: Client) -> None:
    inv_id = deployed("invoke", "cli-noop").stdout.strip()
    api.wait(inv_id, timeout=120)
    result = deployed("cancel", inv_id)
    assert result.code == 1
    assert "already ended (succeeded)" in result.stderr


def test_idempotency_key_returns_the_same_invocation(deployed: Eops) -> None:
    first = deployed("invoke", "cli-noop", "--idempotency-key", "cli-key-1").stdout.strip()
    second = deployed("invoke", "cli-noop", "-k", "cli-key-1").stdout.strip()
    third = deployed("invoke", "cli-noop", "-k", "cli-key-2").stdout.strip()
    assert first == second
    assert third != first


def test_ls_pages_with_cursor_and_all(deployed: Eops, api: Client, write: Writer) -> None:
    path = write("pager.json", spec("cli-pager", "pass"))
    assert deployed("fn", "deploy", str(path)).code == 0
    ids = [api.invoke("cli-pager").id for _ in range(3)]
    newest_first = list(reversed(ids))

    first = deployed("ls", "--function", "cli-pager", "--limit", "2")
    assert first.code == 0, first.output
    assert row_ids(first.stdout) == newest_first[:2]
    hint = re.search(r"more: eops ls --function cli-pager --limit 2 --cursor (\S+)", first.stderr)
    assert hint is not None, first.stderr

    second = deployed("ls", "--function", "cli-pager", "--limit", "2", "--cursor", hint.group(1))
    assert row_ids(second.stdout) == newest_first[2:]
    assert "more:" not in second.stderr

    everything = json.loads(
        deployed("ls", "--function", "cli-pager", "--limit", "2", "--all", "--json").stdout
    )
    assert [item["id"] for item in everything["items"]] == newest_first
    assert everything["next_cursor"] is None


def test_ls_filters_by_state(deployed: Eops, api: Client) -> None:
    inv_id = deployed("invoke", "cli-fail").stdout.strip()
    api.wait(inv_id, timeout=120)
    listed = json.loads(deployed("ls", "--state", "failed", "--json").stdout)["items"]
    assert inv_id in [item["id"] for item in listed]
    assert {item["state"] for item in listed} == {"failed"}


def test_invoke_annotations_reach_the_invocation(deployed: Eops, api: Client) -> None:
    result = deployed(
        "invoke", "cli-noop", "--annotation", "eops.dev/run-seconds=12", "-a", "eops.dev/exit-code=0"
    )
    assert result.code == 0, result.output
    inv = api.get_invocation(result.stdout.strip())
    assert inv.annotations == {"eops.dev/run-seconds": "12", "eops.dev/exit-code": "0"}
    shown = deployed("status", inv.id)
    assert "annotations: eops.dev/exit-code=0 eops.dev/run-seconds=12" in shown.stdout


def test_invoke_bad_annotations_are_refused_before_the_request(deployed: Eops, api: Client) -> None:
    before = len(api.list_invocations(function="cli-noop", limit=500).items)
    no_equals = deployed("invoke", "cli-noop", "--annotation", "eops.dev/run-seconds")
    other_key = deployed("invoke", "cli-noop", "-a", "example.com/team=ml")
    for result in (no_equals, other_key):
        assert result.code == 2, result.output
        assert "--annotation" in result.stderr
        assert "Traceback" not in result.output
    assert "has no '='" in no_equals.stderr
    assert "not under eops.dev/" in other_key.stderr
    assert len(api.list_invocations(function="cli-noop", limit=500).items) == before


def test_invoke_help_describes_annotation(deployed: Eops) -> None:
    result = deployed("invoke", "--help")
    assert "--annotation" in result.stdout
    assert "KEY=VALUE" in result.stdout


def test_invoke_bad_inputs(deployed: Eops, write: Writer) -> None:
    not_json = deployed("invoke", "hello", "--data", "{name: Ada}")
    assert not_json.code == 2
    assert "--data: the --data value is not valid JSON" in not_json.stderr

    absent = deployed("invoke", "hello", "--data", "@/nonexistent/payload.json")
    assert absent.code == 2
    assert "cannot read the payload file" in absent.stderr

    unknown = deployed("invoke", "no-such-fn")
    assert unknown.code == 1
    assert "no function named 'no-such-fn'" in unknown.stderr

    big = write("big.json", json.dumps("x" * 70_000))
    too_big = deployed("invoke", "hello", "--data", f"@{big}")
    assert too_big.code == 2
    assert "larger than the limit" in too_big.stderr

    for result in (not_json, absent, unknown, too_big):
        assert "Traceback" not in result.output


def test_status_of_an_unknown_invocation(deployed: Eops) -> None:
    result = deployed("status", "inv-0000000000")
    assert result.code == 1
    assert "no invocation 'inv-0000000000'" in result.stderr


def row_ids(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines() if line.startswith("inv-")]


def wait_for_state(api: Client, inv_id: str, state: State) -> None:
    """Long-polls until the invocation reaches `state` (or fails the test if it ends first)."""
    for _ in range(600):
        current = api.get_invocation(inv_id, wait=0).state
        if current is state:
            return
        assert not current.terminal, f"{inv_id} ended as {current} before reaching {state}"
        time.sleep(0.1)
    pytest.fail(f"{inv_id} never reached {state}")
