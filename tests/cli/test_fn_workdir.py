"""Where a function deployed from a file runs, and whether deploying it again is a new version,
as a new user meets them: `eops fn deploy` from another directory, `eops serve --example` then
`eops fn deploy` of the same file, against a real gateway (the local backend)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.server import REPO, RunningServer, running_server

from .runner import Eops

# Reads its payload (a number), multiplies it by the number in factor.txt (opened relative to
# where it runs) and hands the product back.
WORK = """\
import json, os
with open(os.environ["EOPS_PAYLOAD_PATH"]) as fh:
    number = json.load(fh)
with open("factor.txt") as fh:
    factor = int(fh.read())
with open(os.environ["EOPS_RESULT_PATH"], "w") as fh:
    json.dump({"product": number * factor, "cwd": os.getcwd()}, fh)
"""


def function_dir(root: Path, factor: int) -> Path:
    root.mkdir(parents=True)
    (root / "work.py").write_text(WORK)
    (root / "factor.txt").write_text(str(factor))
    return root.resolve()


def run(eops: Eops, name: str, payload: str) -> dict[str, object]:
    result = eops("invoke", name, "--data", payload, "--wait", "--json")
    assert result.code == 0, result.output
    inv: dict[str, object] = json.loads(result.stdout)
    return inv


def test_a_spec_deployed_from_another_directory_runs_its_relative_script_there(
    eops_process: Eops, tmp_path: Path
) -> None:
    """`cd ~/myfn && eops fn deploy fn.yaml` with `command: ["python", "work.py"]`: the gateway
    runs in the checkout, yet the job runs in ~/myfn, where work.py and factor.txt are. A real
    process started in ~/myfn: the working directory is the point."""
    eops = eops_process
    myfn = function_dir(tmp_path / "myfn", factor=2)
    (myfn / "fn.yaml").write_text('name: wd-double\ncommand: ["python", "work.py"]\ntimeout_seconds: 60\n')

    deployed = eops("fn", "deploy", "fn.yaml", cwd=myfn)
    assert deployed.code == 0, deployed.output
    assert "deployed wd-double, version 1" in deployed.stdout
    assert f"workdir {myfn} (the spec file's directory)" in deployed.stdout

    inv = run(eops, "wd-double", "21")
    assert inv["result"] == {"product": 42, "cwd": str(myfn)}

    spec = json.loads(eops("fn", "get", "wd-double", "--json").stdout)["spec"]
    assert spec["workdir"] == str(myfn)
    assert spec["command"] == ["python", "work.py"], "the command stays as written"


def test_workdir_in_the_spec_overrides_the_spec_files_directory(eops: Eops, tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "work.py").write_text(WORK)  # beside the spec, but not where it is told to run
    (specs / "factor.txt").write_text("1000")
    absolute = function_dir(tmp_path / "absolute", factor=3)
    relative = function_dir(tmp_path / "relative", factor=5)
    for name, workdir, factor, where in (
        ("wd-absolute", str(absolute), 3, absolute),
        ("wd-relative", "../relative", 5, relative),  # relative to the spec file's directory
    ):
        path = specs / f"{name}.yaml"
        path.write_text(f'name: {name}\ncommand: ["python", "work.py"]\nworkdir: {workdir}\n')
        deployed = eops("fn", "deploy", str(path))
        assert deployed.code == 0, deployed.output
        assert f"workdir {where}" in deployed.stdout
        assert "the spec file's directory" not in deployed.stdout
        assert run(eops, name, "2")["result"] == {"product": 2 * factor, "cwd": str(where)}


def test_a_spec_that_names_no_file_beside_it_runs_in_the_gateways_directory(
    eops: Eops, tmp_path: Path
) -> None:
    path = tmp_path / "inline.yaml"
    path.write_text(
        'name: wd-inline\ncommand: ["python", "-c", "import os, sys; sys.stdout.write(os.getcwd())"]\n'
    )
    deployed = eops("fn", "deploy", str(path))
    assert deployed.code == 0, deployed.output
    assert "no workdir: the local backend runs it in the gateway's working directory" in deployed.stdout
    spec = json.loads(eops("fn", "get", "wd-inline", "--json").stdout)["spec"]
    assert "workdir" not in spec or spec["workdir"] is None


def test_a_relative_workdir_sent_over_http_is_refused_naming_the_field(server: RunningServer) -> None:
    with server.client() as http:
        answer = http.put("/v1/functions/wd-http", json={"command": ["python", "w.py"], "workdir": "here"})
    assert answer.status_code == 422, answer.text
    [problem] = answer.json()["error"]["problems"]
    assert problem["field"] == "workdir"
    assert "absolute" in problem["problem"]


def test_the_example_deployed_by_serve_then_by_fn_deploy_stays_version_1(tmp_path: Path) -> None:
    """`eops serve --example` then `eops fn deploy examples/hello.yaml`, alternating: one spec,
    version 1 throughout, and the CLI says it was unchanged."""
    with running_server(tmp_path / "data", "--gpus", "1", "--example") as first:
        eops = Eops(first, in_process=True)
        again = eops("fn", "deploy", "examples/hello.yaml")
        assert again.code == 0, again.output
        assert "hello unchanged, version 1" in again.stdout
    second = first.again()  # --example deploys the examples once more
    try:
        eops = Eops(second, in_process=True)
        answer = json.loads(eops("fn", "deploy", "examples/hello.yaml", "--json").stdout)
        assert (answer["version"], answer["changed"]) == (1, False)
        assert answer["spec"]["workdir"] == str(REPO / "examples")
        assert run(eops, "hello", '{"name": "Ada"}')["result"] == {"greeting": "hello, Ada!", "gpu_slot": "0"}
    finally:
        second.stop()
