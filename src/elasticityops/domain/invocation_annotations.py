"""Per-invocation pod annotations: hints for the dev cluster (and ElasticityOps itself), limited
to keys under `eops.dev/`, checked here once for the API, the Python client and the CLI (pure).

Why only `eops.dev/`: a function's `annotations` field is the place for the pod's other
annotations (GKE features, sidecars), reviewed once with the spec; a caller of the invoke route
may hold an invoke-scoped token only, and must not switch those on per request. The keys
`eops.dev/run-seconds` and `eops.dev/exit-code` are what the dev cluster's kwok stages read
(devcluster/stages.py), so their values are checked here too: a typo there would otherwise
make the simulated pod run forever or fail, far from the request that caused it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.functions import ANNOTATION_KEY_RE
from elasticityops.domain.simulated_run import EXIT_CODE, RUN_SECONDS, quoted, value_problem

__all__ = ["EXIT_CODE", "PREFIX", "RUN_SECONDS", "check", "parse_params", "problems_of"]

PREFIX = "eops.dev/"
MAX_COUNT = 16
MAX_VALUE_CHARS = 256
# Keys and values together, as UTF-8: a bound on what each row and each Job carries.
MAX_TOTAL_BYTES = 4096

_FIX_FORM = f"write it as KEY=VALUE with KEY under {PREFIX}, e.g. {RUN_SECONDS}=12"


def parse_params(raw: Iterable[str], field: str) -> dict[str, str]:
    """`KEY=VALUE` strings (a repeated query parameter, CLI option) as annotations, checked as
    `check` does; `field` names the parameter in every problem. A key given twice is refused:
    which of the two was meant is not ours to guess."""
    found: dict[str, str] = {}
    problems: list[FieldProblem] = []
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep:
            problems.append(FieldProblem(field, f"{quoted(item)} has no '='", _FIX_FORM))
        elif key in found:
            problems.append(FieldProblem(field, f"{quoted(key)} is given twice", "give each key once"))
        else:
            found[key] = value
    problems += problems_of(found, field)
    if problems:
        raise InvalidInput(problems)
    return found


def check(annotations: Mapping[str, str], field: str) -> dict[str, str]:
    """The annotations as a plain dict, or InvalidInput naming `field` and each problem."""
    problems = problems_of(annotations, field)
    if problems:
        raise InvalidInput(problems)
    return dict(annotations)


def problems_of(annotations: Mapping[str, str], field: str) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    if len(annotations) > MAX_COUNT:
        problems.append(FieldProblem(field, f"{len(annotations)} annotations", f"give at most {MAX_COUNT}"))
    total = 0
    for key, value in annotations.items():
        total += len(key.encode()) + len(value.encode())
        problems += _key_problems(key, field)
        problems += _value_problems(key, value, field)
    if total > MAX_TOTAL_BYTES:
        problems.append(
            FieldProblem(
                field,
                f"keys and values come to {total} bytes",
                f"keep them to {MAX_TOTAL_BYTES} bytes in all",
            )
        )
    return problems


def _key_problems(key: str, field: str) -> list[FieldProblem]:
    if not key.startswith(PREFIX):
        return [
            FieldProblem(
                field,
                f"{quoted(key)} is not under {PREFIX}",
                f"use a key under {PREFIX}; set other pod annotations in the function's annotations field",
            )
        ]
    if not ANNOTATION_KEY_RE.match(key):
        return [
            FieldProblem(
                field,
                f"{quoted(key)} is not a valid annotation key",
                f"after {PREFIX} use up to 63 letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit",
            )
        ]
    return []


def _value_problems(key: str, value: str, field: str) -> list[FieldProblem]:
    if len(value) > MAX_VALUE_CHARS:
        return [
            FieldProblem(
                field,
                f"the value of {key} is {len(value)} characters long",
                f"use at most {MAX_VALUE_CHARS}",
            )
        ]
    if not value.isprintable():
        return [FieldProblem(field, f"the value of {key} holds a control character", "remove it")]
    problem = value_problem(key, value)
    if problem is not None:
        return [FieldProblem(field, *problem)]
    return []
