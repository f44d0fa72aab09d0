from __future__ import annotations

import pytest

from elasticityops.domain.errors import InvalidInput
from elasticityops.domain.functions import (
    MAX_NESTING,
    FunctionSpec,
    Priority,
    load_function_text,
    parse_function_spec,
    spec_to_json,
)
from elasticityops.domain.numbers import whole_number

VALID = {
    "name": "embed-images",
    "image": "us-docker.pkg.dev/acme/gpu/worker:1.4",
    "command": ["python", "worker.py"],
    "env": {"MODEL": "clip-vit"},
    "gpu": {"type": "nvidia-tesla-t4", "count": 1},
    "machine_type": "n1-standard-4",
    "resources": {"cpu": "3", "memory": "12Gi"},
    "timeout_seconds": 3600,
    "priority": "normal",
    "max_concurrency": 500,
}


def test_the_issue_example_is_valid() -> None:
    spec = parse_function_spec(VALID)
    assert spec.name == "embed-images"
    assert spec.gpu.count == 1
    assert spec.priority is Priority.normal
    assert spec.resources.memory == "12Gi"


def test_defaults_fill_in_what_is_left_out() -> None:
    spec = parse_function_spec({"name": "tiny", "command": ["true"]})
    assert spec.gpu.type == "nvidia-tesla-t4"
    assert spec.gpu.count == 1
    assert spec.timeout_seconds == 3600
    assert spec.machine_type == "n1-standard-4"


def _with(**changes: object) -> dict[str, object]:
    body = dict(VALID)
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        pytest.param(_with(name="Embed_Images"), "name", "DNS-1123", id="uppercase-name"),
        pytest.param(_with(name="a" * 41), "name", "at most 40", id="long-name"),
        pytest.param(_with(name="-x"), "name", "DNS-1123", id="leading-dash"),
        pytest.param(_with(gpu={"count": 0}), "gpu.count", "larger", id="gpu-count-0"),
        pytest.param(_with(gpu={"count": 9}), "gpu.count", "smaller", id="gpu-count-9"),
        pytest.param(_with(gpu={"type": "nvidia-gtx-1080"}), "gpu.type", "nvidia-tesla-t4", id="gpu-type"),
        pytest.param(_with(timeout_seconds=-5), "timeout_seconds", "larger", id="negative-timeout"),
        pytest.param(_with(timeout_seconds="soon"), "timeout_seconds", "whole number", id="timeout-text"),
        pytest.param(_with(colour="blue"), "colour", "allowed fields", id="unknown-field"),
        pytest.param(
            _with(gpu={"count": 1, "vram": 16}),
            "gpu.vram",
            "allowed fields: type, count",
            id="nested-unknown",
        ),
        pytest.param(_with(command=[]), "command", "at least one", id="empty-command"),
        pytest.param(_with(command=None), "command", "add it", id="missing-command"),
        pytest.param(_with(priority="urgent"), "priority", "high", id="bad-priority"),
        pytest.param(_with(env={"1X": "y"}), "env", "environment variable", id="bad-env-name"),
        pytest.param(_with(env={"EOPS_TOKEN": "y"}), "env", "reserved", id="reserved-env"),
        pytest.param(_with(resources={"cpu": "lots"}), "resources.cpu", "3500m", id="bad-cpu"),
        pytest.param(_with(resources={"memory": "12 GB"}), "resources.memory", "12Gi", id="bad-memory"),
        pytest.param(_with(max_concurrency=0), "max_concurrency", "larger", id="zero-concurrency"),
    ],
)
def test_bad_specs_name_the_field_and_the_fix(body: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_function_spec(body)
    fields = [p.field for p in caught.value.problems]
    assert field in fields, fields
    assert words in str(caught.value)


def test_url_name_must_match_the_body() -> None:
    with pytest.raises(InvalidInput, match="differs"):
        parse_function_spec(VALID, name="other")
    assert parse_function_spec(_with(name=None), name="from-url").name == "from-url"


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidInput, match="mapping"):
        parse_function_spec(["a", "list"])


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(InvalidInput, match="line 2"):
        load_function_text("name: x\n\tcommand: [a]\n", source="fn.yaml")


def test_json_is_yaml_too() -> None:
    spec = load_function_text('{"name": "j", "command": ["echo", "hi"]}')
    assert isinstance(spec, FunctionSpec)
    assert spec.command == ["echo", "hi"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(60, 60), (60.0, 60), ("60", 60), (" 60 ", 60), ("1e3", 1000), ("1.5e3", 1500), ("-3", -3)],
)
def test_whole_numbers_are_read_as_json_writes_them(value: object, expected: int) -> None:
    assert whole_number(value) == expected


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (True, "true is not a number"),
        (False, "false is not a number"),
        ("\uff15", "digits 0-9"),  # full-width: int() would take it
        ("١٢", "digits 0-9"),  # Arabic-Indic
        ("1.5", "not a whole number"),
        (1.5, "not a whole number"),
        (float("inf"), "not a whole number"),
        ("1e999999", "not a whole number"),
        ("1e99", "far too large"),
        ("1_000", "not a whole number"),
        (None, "expected a whole number"),
        ([1], "expected a whole number"),
    ],
)
def test_what_is_not_a_whole_number_says_why(value: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        whole_number(value)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("gpu: {count: true}", "gpu.count", "true is not a number"),
        ("timeout_seconds: 1e9", "timeout_seconds", "less than or equal to 604800"),
        ("timeout_seconds: '\uff11\uff10'", "timeout_seconds", "digits 0-9"),
        ("max_concurrency: 2.5", "max_concurrency", "not a whole number"),
    ],
)
def test_spec_numbers_use_the_one_strict_parser(text: str, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_function_text(f"name: fn\ncommand: [python]\n{text}\n")
    found = caught.value.problems[0]
    assert found.field == field
    assert words in found.problem
    assert found.fix


def test_yaml_exponents_are_numbers() -> None:
    assert load_function_text("name: fn\ncommand: [python]\ntimeout_seconds: 6e2\n").timeout_seconds == 600


@pytest.mark.parametrize(
    "text",
    [
        "name: fn\ncommand: [python]\nenv: " + "[" * 5000 + "]" * 5000,
        "name: fn\ncommand: [python]\nenv: " + "[" * 5000,  # not even closed
        "".join(f"{'  ' * i}k{i}:\n" for i in range(200)) + "  " * 200 + "v",  # block style
    ],
    ids=["flow", "unclosed", "block"],
)
def test_a_deeply_nested_spec_is_refused_before_it_is_parsed(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_function_text(text, source="deep.yaml")
    assert caught.value.problems[0].field == "deep.yaml"
    assert f"nested deeper than {MAX_NESTING} levels" in caught.value.problems[0].problem


def test_nul_in_an_argument_or_an_env_value_is_refused_at_deploy_naming_it() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_function_spec(
            {"name": "fn", "command": ["python", "-c\x00x"], "env": {"A": "ok", "B": "b\x00"}}
        )
    assert [(p.field, p.problem) for p in caught.value.problems] == [
        ("command.1", "holds a NUL character"),
        ("env.B", "holds a NUL character"),
    ]


@pytest.mark.parametrize(
    ("written", "types"),
    [
        pytest.param("nvidia-l4", ("nvidia-l4",), id="one-name"),
        pytest.param(["nvidia-l4"], ("nvidia-l4",), id="list-of-one"),
        pytest.param(["nvidia-tesla-t4", "nvidia-l4"], ("nvidia-tesla-t4", "nvidia-l4"), id="two-in-order"),
        pytest.param(["nvidia-l4", "nvidia-tesla-t4"], ("nvidia-l4", "nvidia-tesla-t4"), id="order-kept"),
        pytest.param(
            ["nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-v100", "nvidia-tesla-a100"],
            ("nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-v100", "nvidia-tesla-a100"),
            id="four",
        ),
    ],
)
def test_gpu_type_is_one_name_or_an_ordered_list(written: object, types: tuple[str, ...]) -> None:
    spec = parse_function_spec(_with(gpu={"type": written, "count": 2}))
    assert spec.gpu.types == types
    assert spec.gpu.type == types[0]  # the preferred one, for code that asks for one type
    # Read back as written: one name stays one name, a list stays a list.
    dumped = spec.model_dump(mode="json")["gpu"]
    assert dumped == {"type": written, "count": 2}
    assert parse_function_spec(spec.model_dump(mode="json")) == spec


@pytest.mark.parametrize(
    ("written", "words"),
    [
        pytest.param([], "list 1-4", id="empty-list"),
        pytest.param(["nvidia-l4"] * 5, "list 1-4", id="five"),
        pytest.param(["nvidia-l4", "nvidia-l4"], "listed twice", id="repeated"),
        pytest.param(
            ["nvidia-tesla-t4", "nvidia-gtx-1080"], "unknown GPU type 'nvidia-gtx-1080'", id="unknown"
        ),
        pytest.param(["nvidia-tesla-t4", 4], "unknown GPU type 4", id="not-a-name"),
        pytest.param(4, "give one name", id="a-number"),
        pytest.param({"first": "nvidia-l4"}, "give one name", id="a-mapping"),
    ],
)
def test_bad_gpu_type_lists_name_the_field_and_the_fix(written: object, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_function_spec(_with(gpu={"type": written}))
    assert [p.field for p in caught.value.problems] == ["gpu.type"]
    assert words in str(caught.value)


def test_preemption_is_off_by_default_and_leaves_the_stored_text_as_before() -> None:
    plain = FunctionSpec(name="fn", command=["run"])
    assert (plain.preemptible, plain.retries) == (False, 0)
    text = spec_to_json(plain)
    # The canonical text of a spec stored before these fields existed: still the same version.
    assert "preemptible" not in text
    assert "retries" not in text
    assert FunctionSpec.model_validate_json(text) == plain
    opted = FunctionSpec(name="fn", command=["run"], preemptible=True, retries=3)
    assert FunctionSpec.model_validate_json(spec_to_json(opted)) == opted


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"retries": 11}, "retries", "less than or equal to 10"),
        ({"retries": -1}, "retries", "greater than or equal to 0"),
        ({"retries": True}, "retries", ""),
        ({"preemptible": "sometimes"}, "preemptible", ""),
    ],
    ids=["too-many", "negative", "bool-is-not-a-count", "not-a-bool"],
)
def test_bad_preemption_fields_name_the_field(body: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_function_spec({"name": "fn", "command": ["run"], **body})
    [problem] = caught.value.problems
    assert problem.field == field
    assert words in problem.problem
