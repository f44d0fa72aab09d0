"""A GPU function: what users declare in YAML/JSON, validated with messages that name the
field and the fix."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StringConstraints,
    ValidationError,
    field_validator,
)

from elasticityops.domain import simulated_run
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.numbers import WholeNumber
from elasticityops.domain.webhook_spec import WebhookSpec

# Deeper than any spec needs, and well inside Python's recursion limit, which YAML's composer
# would otherwise hit (a RecursionError) on a deeply nested document.
MAX_NESTING = 64

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CPU_RE = re.compile(r"^([0-9]+(\.[0-9]{1,3})?|[0-9]+m)$")
MEMORY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$")
ANNOTATION_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_NAME_LEN = 40
MAX_PATH_LEN = 4096  # PATH_MAX on Linux
MAX_GPUS_PER_JOB = 8
MAX_RETRIES = 10
MAX_EXAMPLE_BYTES = 16 * 1024  # what a form shows and a person edits, not a data set
KNOWN_GPU_TYPES = (
    "nvidia-tesla-t4",
    "nvidia-l4",
    "nvidia-tesla-v100",
    "nvidia-tesla-p100",
    "nvidia-tesla-p4",
    "nvidia-tesla-a100",
    "nvidia-a100-80gb",
    "nvidia-h100-80gb",
    "nvidia-h100-mega-80gb",
    "nvidia-h200-141gb",
)


class Priority(StrEnum):
    high = "high"
    normal = "normal"
    low = "low"

    @property
    def rank(self) -> int:
        """Smaller runs first."""
        return {"high": 0, "normal": 1, "low": 2}[self.value]


class _Strict(BaseModel):
    # No str_strip_whitespace here: a command's arguments and env's values are taken as written
    # (`echo "  two  "` means the spaces); names and identifiers strip through `Identifier`.
    model_config = ConfigDict(extra="forbid", frozen=True)


Identifier = Annotated[str, StringConstraints(strip_whitespace=True)]
"""A name, image, machine type or quantity: surrounding whitespace is never meant."""


MAX_GPU_TYPES = 4


class GpuSpec(_Strict):
    # Serialized under its wire name, so a spec reads back (GET, the store) as it was written.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    written: str | list[str] = Field(
        "nvidia-tesla-t4",
        alias="type",
        description="GKE accelerator name, e.g. nvidia-tesla-t4 or nvidia-l4; or an ordered list of "
        f"1-{MAX_GPU_TYPES} distinct ones to spill over to when the first cannot be had "
        "(e.g. [nvidia-tesla-t4, nvidia-l4])",
    )
    count: WholeNumber = Field(1, ge=1, le=MAX_GPUS_PER_JOB, description="GPUs per invocation, 1-8")

    @field_validator("written", mode="before")
    @classmethod
    def _known_types(cls, value: object) -> object:
        choices = f"use one of: {', '.join(KNOWN_GPU_TYPES)}"
        if isinstance(value, str):
            value = value.strip()
            if value not in KNOWN_GPU_TYPES:
                raise ValueError(f"unknown GPU type {value!r}; {choices}")
            return value
        if not isinstance(value, list | tuple):
            raise ValueError(
                f"{value!r} is not a GPU type; give one name (e.g. nvidia-tesla-t4) or an ordered "
                f"list of 1-{MAX_GPU_TYPES} (e.g. [nvidia-tesla-t4, nvidia-l4])"
            )
        if not 1 <= len(value) <= MAX_GPU_TYPES:
            raise ValueError(f"lists {len(value)} GPU types; list 1-{MAX_GPU_TYPES}, the preferred first")
        names: list[str] = []
        for item in value:
            if not isinstance(item, str) or item.strip() not in KNOWN_GPU_TYPES:
                raise ValueError(f"unknown GPU type {item!r} in the list; {choices}")
            if item.strip() in names:
                raise ValueError(f"{item.strip()} is listed twice; name each GPU type once")
            names.append(item.strip())
        return names

    @property
    def types(self) -> tuple[str, ...]:
        """The GPU types it may run on, the preferred first (one, unless it lists several)."""
        return (self.written,) if isinstance(self.written, str) else tuple(self.written)

    @property
    def type(self) -> str:
        """The preferred GPU type: the one it is tried on first."""
        return self.types[0]


class Resources(_Strict):
    cpu: Identifier | None = Field(
        None, description='CPU request, e.g. "3" or "3500m"; default: sized to the machine'
    )
    memory: Identifier | None = Field(
        None, description='memory request, e.g. "12Gi"; default: sized to the machine'
    )

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: str | None) -> str | None:
        if value is not None and not CPU_RE.match(value):
            raise ValueError(f'{value!r} is not a CPU quantity; write it like "3" or "3500m"')
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and not MEMORY_RE.match(value):
            raise ValueError(f'{value!r} is not a memory quantity; write it like "12Gi" or "512Mi"')
        return value


class FunctionSpec(_Strict):
    """A registered GPU function. Field descriptions end up in the OpenAPI spec."""

    name: Identifier = Field(
        description="DNS-1123 label: lowercase letters, digits and '-', at most 40 characters"
    )
    image: Identifier = Field(
        "python:3.11-slim", min_length=1, description="container image (Kubernetes backend)"
    )
    command: list[str] = Field(
        min_length=1, description="argv of the job, run without a shell (both backends)"
    )
    env: dict[str, str] = Field(default_factory=dict, description="environment variables for the job")
    gpu: GpuSpec = Field(default_factory=lambda: GpuSpec())
    machine_type: Identifier = Field("n1-standard-4", description="node machine type, e.g. n1-standard-4")
    resources: Resources = Field(default_factory=lambda: Resources())
    timeout_seconds: WholeNumber = Field(
        3600, gt=0, le=7 * 24 * 3600, description="run-time limit in seconds"
    )
    priority: Priority = Priority.normal
    max_concurrency: WholeNumber = Field(500, ge=1, le=100_000, description="most invocations of it at once")
    preemptible: StrictBool = Field(
        False,
        description="whether higher-priority work blocked by a full GPU budget may preempt this "
        "function's pending or running invocations (the gateway stops their job); see retries",
    )
    retries: WholeNumber = Field(
        0,
        ge=0,
        le=MAX_RETRIES,
        description="how many times an invocation ended by preemption, or by the loss of its node "
        f"(a spot reclaim), is put back in the queue (0-{MAX_RETRIES}) before it fails with reason "
        "preempted (evicted for a lost node)",
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="pod annotations (Kubernetes backend), e.g. for GKE features such as gcsfuse volumes",
    )
    workdir: str | None = Field(
        None,
        max_length=MAX_PATH_LEN,
        description="the directory the command runs in, an absolute path (local backend; the "
        "Kubernetes backend runs it in the image's working directory). Deployed from a file "
        "(eops fn deploy), a relative one is relative to the file's directory, and a spec without "
        "one whose command names a file or directory beside the file gets that directory. "
        "Unset: the gateway's working directory",
    )

    example: JsonValue = Field(
        None,
        description="an example input: a JSON payload this function takes (the console's Invoke "
        f"form starts from it), at most {MAX_EXAMPLE_BYTES // 1024} KiB as JSON; null: none",
    )
    webhook: WebhookSpec | None = Field(
        None,
        description="where to POST signed events of this function's invocations (Standard "
        "Webhooks): {url, events: [started, completed], include_result}; null: none. The deploy "
        "that first sets or changes the URL answers the signing secret once (webhook_secret)",
    )

    @field_validator("example")
    @classmethod
    def _example(cls, value: JsonValue) -> JsonValue:
        size = len(json.dumps(value, ensure_ascii=False).encode())
        if size > MAX_EXAMPLE_BYTES:
            raise ValueError(
                f"is {size} bytes as JSON; keep an example input within {MAX_EXAMPLE_BYTES} bytes "
                "(send larger payloads with eops invoke --data @FILE)"
            )
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > MAX_NAME_LEN:
            raise ValueError(f"{value!r} is {len(value)} characters long; use at most {MAX_NAME_LEN}")
        if not NAME_RE.match(value):
            raise ValueError(
                f"{value!r} is not a DNS-1123 label; use lowercase letters, digits and '-', "
                "starting with a letter and not ending with '-'"
            )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if any(part == "" for part in value):
            raise ValueError("command has an empty argument; remove it")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "\x00" in value:
            raise ValueError("holds a NUL character; remove it")
        if not posixpath.isabs(value):
            raise ValueError(
                f"{value!r} is not an absolute path; give one starting with / (in a spec file, "
                "eops fn deploy makes a relative one absolute from the file's directory)"
            )
        # One spelling per directory, so that "/srv/fn/" deployed again is no new version.
        return posixpath.normpath(value)

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not ANNOTATION_KEY_RE.match(key):
                raise ValueError(
                    f"{key!r} is not a valid annotation key; "
                    "use [prefix/]name with letters, digits, '-', '_', '.'"
                )
            problem = simulated_run.value_problem(key, text)
            if problem is not None:
                raise ValueError(f"{problem[0]}; {problem[1]}")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not ENV_NAME_RE.match(key):
                raise ValueError(
                    f"{key!r} is not a valid environment variable name; use [A-Za-z_][A-Za-z0-9_]*"
                )
            if key.startswith("EOPS_"):
                raise ValueError(f"{key!r} is reserved (EOPS_* is set by ElasticityOps); rename it")
        return value


# How to fix each kind of pydantic validation error: one table for function specs and for the
# API's own checks of path, query and header parameters.
_FIXES = {
    "extra_forbidden": "remove it",
    "missing": "add it",
    "greater_than": "use a larger number",
    "greater_than_equal": "use a larger number",
    "less_than": "use a smaller number",
    "less_than_equal": "use a smaller number",
    "int_parsing": "use a whole number",
    "int_type": "use a whole number",
    "float_parsing": "use a number",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false (no quotes)",
    "string_type": "use a string",
    "string_too_long": "use a shorter value",
    "string_too_short": "use a longer value",
    "string_pattern_mismatch": "match the pattern given in /openapi.json",
    "list_type": 'use a list of strings, e.g. ["python", "worker.py"]',
    "too_short": "give at least one element",
    "enum": "use one of the listed values",
    "literal_error": "use one of the listed values",
    "json_invalid": "send valid JSON",
    "dict_type": "use a mapping of NAME: value",
    "model_type": "use a mapping",
}


def validation_fix(kind: str, allowed: Sequence[str] = ()) -> str:
    """The fix for one pydantic error type; for an unknown field, name the allowed ones."""
    fix = _FIXES.get(kind, "")
    if kind == "extra_forbidden" and allowed:
        fix = f"{fix} (allowed fields: {', '.join(allowed)})"
    return fix


def problems_from_validation(
    error: ValidationError, model: type[BaseModel] | None = None
) -> list[FieldProblem]:
    """Turn pydantic's errors into FieldProblems with a dotted field path and a fix."""
    out: list[FieldProblem] = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item["loc"]) or "(body)"
        kind = item["type"]
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
            fix = ""
        else:
            allowed: list[str] = []
            if kind == "extra_forbidden" and model is not None:
                allowed = _allowed_fields(model, item["loc"][:-1])
            fix = validation_fix(kind, allowed)
        if kind == "extra_forbidden":
            message = "unknown field"
        out.append(FieldProblem(loc, message, fix))
    return out


def _allowed_fields(model: type[BaseModel], parent: tuple[int | str, ...]) -> list[str]:
    current: Any = model
    for part in parent:
        field_info = _wire_fields(current).get(str(part))
        if field_info is None:
            return []
        current = _model_of(field_info.annotation)
    return list(_wire_fields(current))


def _model_of(annotation: Any) -> Any:
    """The model in an optional field's annotation (`WebhookSpec | None`), else the annotation."""
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return annotation


def _wire_fields(model: Any) -> dict[str, Any]:
    """A model's fields by the names users write (a field's alias, where it has one)."""
    fields = getattr(model, "model_fields", {})
    return {info.alias or name: info for name, info in fields.items()}


def parse_function_spec(data: object, *, name: str | None = None) -> FunctionSpec:
    """Validate plain data into a FunctionSpec. `name`, when given (from the URL), must agree
    with the body's name or fills it in."""
    if not isinstance(data, Mapping):
        raise InvalidInput(
            [FieldProblem("(body)", "expected a mapping of fields", "send a JSON object / YAML mapping")]
        )
    body = dict(data)
    if name is not None:
        if "name" in body and body["name"] != name:
            raise InvalidInput(
                [
                    FieldProblem(
                        "name", f"{body['name']!r} differs from {name!r} in the URL", "make them equal"
                    )
                ]
            )
        body["name"] = name
    try:
        spec = FunctionSpec.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(problems_from_validation(exc, FunctionSpec)) from None
    _refuse_nul(spec)
    return spec


def _refuse_nul(spec: FunctionSpec) -> None:
    """A NUL cannot be passed to a process (argv and environment are C strings): refuse it at
    deploy, naming the field, rather than fail every invocation later. Checked here, where
    specs come in, not in the model, so that a spec stored before still reads."""
    problems = [
        FieldProblem(f"command.{i}", "holds a NUL character", "remove it")
        for i, part in enumerate(spec.command)
        if "\x00" in part
    ]
    problems += [
        FieldProblem(f"env.{key}", "holds a NUL character", "remove it")
        for key, value in spec.env.items()
        if "\x00" in value
    ]
    if problems:
        raise InvalidInput(problems)


class _TooDeep(Exception):
    pass


def check_yaml_nesting(text: str, source: str, max_depth: int = MAX_NESTING) -> None:
    """Refuse a YAML (or JSON) document nested deeper than `max_depth` before it is composed:
    PyYAML's parser is iterative, its composer recursive."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise _TooDeep
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except _TooDeep:
        raise InvalidInput(
            [FieldProblem(source, f"nested deeper than {max_depth} levels", "flatten it")]
        ) from None
    except yaml.YAMLError:
        return  # the parse that follows reports it, with where


def load_yaml(text: str, source: str = "spec") -> Any:
    """YAML (a superset of JSON) text as plain data, nesting bounded; InvalidInput when it is
    not YAML."""
    check_yaml_nesting(text, source)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        raise InvalidInput(
            [FieldProblem(source, f"not valid YAML or JSON{where}", "fix the syntax")]
        ) from None


def load_function_text(text: str, source: str = "spec") -> FunctionSpec:
    """Parse YAML (a superset of JSON) text into a FunctionSpec."""
    return parse_function_spec(load_yaml(text, source))


# Fields added after specs were first stored, with their defaults: left out of the canonical
# JSON while at the default, so a spec that does not use them reads as the same text as before
# and redeploying it unchanged after an upgrade is not a new version.
_ADDED_LATER: dict[str, object] = {
    "preemptible": False,
    "retries": 0,
    "workdir": None,
    "example": None,
    "webhook": None,
}


def spec_to_json(spec: FunctionSpec) -> str:
    data = spec.model_dump(mode="json")
    for key, default in _ADDED_LATER.items():
        if data.get(key) == default:
            del data[key]
    return json.dumps(data, sort_keys=True)
