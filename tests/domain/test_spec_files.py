"""A spec deployed from a file: its relative paths are relative to the file's directory, one
rule for `eops fn deploy`, the Python client and `eops serve --example`."""

from __future__ import annotations

import json
import posixpath
from pathlib import PurePosixPath

import pytest

from elasticityops.domain.errors import InvalidInput
from elasticityops.domain.functions import FunctionSpec, parse_function_spec, spec_to_json
from elasticityops.domain.spec_files import load_spec_file

FILE = PurePosixPath("/home/ada/myfn/fn.yaml")
ON_DISK = {"/home/ada/myfn/work.py", "/home/ada/myfn/data", "/home/ada/shared/lib.py"}


def exists(path: str) -> bool:
    return posixpath.normpath(path) in ON_DISK


def load(text: str) -> FunctionSpec:
    return load_spec_file(text, FILE, exists)


@pytest.mark.parametrize(
    ("command", "workdir"),
    [
        pytest.param('["python", "work.py"]', "/home/ada/myfn", id="a-script-beside-it"),
        pytest.param('["./work.py"]', "/home/ada/myfn", id="the-program-itself"),
        pytest.param('["python", "-m", "data"]', "/home/ada/myfn", id="a-directory-beside-it"),
        pytest.param('["python", "../shared/lib.py"]', "/home/ada/myfn", id="up-and-over"),
        pytest.param('["python", "missing.py"]', None, id="a-name-that-is-not-there"),
        pytest.param('["python", "-c", "print(1)"]', None, id="no-path-at-all"),
        pytest.param('["python", "/opt/work.py"]', None, id="absolute-paths-only"),
        pytest.param('["true"]', None, id="a-program-on-path"),
    ],
)
def test_the_spec_files_directory_is_recorded_when_the_command_names_something_there(
    command: str, workdir: str | None
) -> None:
    spec = load(f"name: fn\ncommand: {command}\n")
    assert spec.workdir == workdir
    assert spec.command == parse_function_spec({"name": "fn", "command": json.loads(command)}).command


def test_workdir_written_in_the_spec_wins_and_a_relative_one_is_from_the_files_directory() -> None:
    assert load('name: fn\ncommand: ["python", "work.py"]\nworkdir: /srv/fn\n').workdir == "/srv/fn"
    assert load('name: fn\ncommand: ["python", "lib.py"]\nworkdir: ../shared\n').workdir == "/home/ada/shared"
    assert load('name: fn\ncommand: ["true"]\nworkdir: .\n').workdir == "/home/ada/myfn"


def test_one_file_loads_as_one_spec_text() -> None:
    text = 'name: fn\ncommand: ["python", "work.py"]\n'
    assert spec_to_json(load(text)) == spec_to_json(load(text))
    plain = 'name: fn\ncommand: ["python", "-c", "pass"]\n'
    assert "workdir" not in spec_to_json(load(plain)), "a spec without one reads as before it existed"


@pytest.mark.parametrize(
    ("workdir", "problem"),
    [
        pytest.param("here", "is not an absolute path", id="relative"),
        pytest.param("/a\x00b", "holds a NUL character", id="nul"),
        pytest.param("/a\ud800", "should be a valid string", id="lone-surrogate"),
    ],
)
def test_a_workdir_sent_as_is_must_be_an_absolute_path(workdir: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_function_spec({"name": "fn", "command": ["true"], "workdir": workdir})
    [found] = info.value.problems
    assert found.field == "workdir"
    assert problem in found.problem


def test_a_workdir_is_kept_in_one_spelling() -> None:
    spec = parse_function_spec({"name": "fn", "command": ["true"], "workdir": "/srv//fn/./x/../"})
    assert spec.workdir == "/srv/fn"
