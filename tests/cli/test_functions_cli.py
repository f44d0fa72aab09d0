"""`eops fn deploy|ls|get|rm` against a real gateway, and every bad function file reported
field by field without a traceback."""

from __future__ import annotations

import json

import pytest

from .runner import Eops, Writer

SPEC = """\
name: {name}
command: ["python", "-c", "print('hi')"]
gpu: {{type: nvidia-tesla-t4, count: 1}}
timeout_seconds: 60
"""


def test_deploy_ls_get_rm(eops_process: Eops, write: Writer) -> None:
    eops = eops_process  # the fn family's real-process test (runner.py)
    path = write("fn.yaml", SPEC.format(name="fn-life"))

    deployed = eops("fn", "deploy", str(path))
    assert deployed.code == 0, deployed.output
    assert "deployed fn-life, version 1" in deployed.stdout

    listed = eops("fn", "ls")
    assert listed.code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if line.startswith("fn-life "))
    assert "1 x nvidia-tesla-t4" in row
    assert "60s" in row

    as_json = eops("fn", "ls", "--json")
    names = [item["spec"]["name"] for item in json.loads(as_json.stdout)["items"]]
    assert "fn-life" in names

    shown = eops("fn", "get", "fn-life")
    assert shown.code == 0, shown.output
    assert "version 1" in shown.stdout
    assert "- print('hi')" in shown.stdout  # the spec as YAML

    removed = eops("fn", "rm", "fn-life")
    assert removed.code == 0, removed.output
    assert "removed fn-life" in removed.stdout
    assert "fn-life" not in [
        item["spec"]["name"] for item in json.loads(eops("fn", "ls", "--json").stdout)["items"]
    ]

    gone = eops("fn", "get", "fn-life")
    assert gone.code == 1
    assert "no function named 'fn-life'" in gone.stderr


def test_redeploying_a_changed_spec_bumps_the_version(eops: Eops, write: Writer) -> None:
    path = write("fn.yaml", SPEC.format(name="fn-versions"))
    assert "version 1" in eops("fn", "deploy", str(path)).stdout
    assert "version 1" in eops("fn", "deploy", str(path)).stdout  # unchanged: same version
    path.write_text(SPEC.format(name="fn-versions").replace("60", "120"))
    again = eops("fn", "deploy", str(path), "--json")
    assert json.loads(again.stdout)["version"] == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("name: [unclosed\n", ["not valid YAML or JSON at line"], id="invalid-yaml"),
        pytest.param(
            SPEC.format(name="fn-x") + "colour: blue\n",
            ["colour: unknown field", "remove it (allowed fields: name, image, command"],
            id="unknown-field",
        ),
        pytest.param(
            SPEC.format(name="Bad_Name"), ["name: 'Bad_Name' is not a DNS-1123 label"], id="bad-name"
        ),
        pytest.param(
            SPEC.format(name="fn-x").replace("count: 1", "count: 9"),
            ["gpu.count: Input should be less than or equal to 8", "use a smaller number"],
            id="gpu-count-9",
        ),
        pytest.param(
            SPEC.format(name="fn-x").replace("count: 1", "count: 0"),
            ["gpu.count: Input should be greater than or equal to 1"],
            id="gpu-count-0",
        ),
        pytest.param(
            SPEC.format(name="fn-x").replace("timeout_seconds: 60", "timeout_seconds: -5"),
            ["timeout_seconds: Input should be greater than 0"],
            id="negative-timeout",
        ),
        pytest.param("name: fn-x\n", ["command: Field required", "add it"], id="missing-command"),
    ],
)
def test_a_bad_function_file_is_reported_by_field_before_any_request(
    text: str, expected: list[str], write: Writer, server_less: Eops
) -> None:
    # No server is reachable: the file is refused here, before any request is made.
    result = server_less("fn", "deploy", str(write("bad.yaml", text)))
    assert result.code == 2, result.output
    assert result.stderr.startswith("error: invalid function spec")
    for fragment in expected:
        assert fragment in result.stderr
    assert "Traceback" not in result.output


def test_a_missing_function_file_is_bad_input(eops: Eops, write: Writer) -> None:
    result = eops("fn", "deploy", str(write("x.yaml", "").with_name("absent.yaml")))
    assert result.code == 2
    assert "absent.yaml: cannot read it (No such file or directory)" in result.stderr


def test_removing_a_busy_function_is_refused_unless_forced(eops: Eops, write: Writer) -> None:
    path = write(
        "busy.yaml", SPEC.format(name="fn-busy").replace("print('hi')", "import time; time.sleep(60)")
    )
    assert eops("fn", "deploy", str(path)).code == 0
    inv_id = eops("invoke", "fn-busy").stdout.strip()

    refused = eops("fn", "rm", "fn-busy")
    assert refused.code == 1
    assert "fn rm --force" in refused.stderr

    forced = eops("fn", "rm", "fn-busy", "--force")
    assert forced.code == 0, forced.output
    state = json.loads(eops("status", inv_id, "--json").stdout)["state"]
    assert state in ("failed", "cancelled")


def test_deploy_prints_the_webhook_secret_once(eops: Eops, write: Writer) -> None:
    path = write("hooked.yaml", SPEC.format(name="fn-hooked") + "webhook: {url: https://example.com/hook}\n")
    first = eops("fn", "deploy", str(path))
    assert first.code == 0, first.output
    secret = next(word for word in first.stdout.split() if word.startswith("whsec_"))
    again = eops("fn", "deploy", str(path))
    assert again.code == 0, again.output
    assert "whsec_" not in again.stdout  # the same URL: not shown again
    assert secret not in eops("fn", "get", "fn-hooked").stdout
