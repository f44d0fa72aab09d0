"""Every numeric knob has a stated range, declared once in its knob() and checked when it is read
(issue 37: `--headroom warm:99999999999999999999` once held a core for good). Every knob of every
module is found by importing the package, so a knob added later is covered: just outside either
bound, and an absurd value, are refused naming the flag, the range and the fix; the bounds
themselves and the default are taken; `eops serve --help` states each range, and a real
`eops serve` refuses an out-of-range value before it starts."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import elasticityops
from elasticityops.cli.main import app
from elasticityops.domain.errors import InvalidInput
from elasticityops.knobs import Spec, knob, parse_all, specs
from elasticityops.settings import Settings
from helpers.cli_help import option_rows
from helpers.server import EOPS, base_env

# Not importable on their own: Alembic's env.py runs inside a migration.
_NOT_MODULES = {"elasticityops.store.migrations.env"}


def _has_knobs(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and any(
        "elasticityops.knob" in f.metadata for f in dataclasses.fields(cls)
    )


def _knob_classes() -> list[type]:
    found: dict[str, type] = {}
    for module_info in pkgutil.walk_packages(elasticityops.__path__, "elasticityops."):
        if module_info.name in _NOT_MODULES or ".devcluster.gomod" in module_info.name:
            continue
        module = importlib.import_module(module_info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and _has_knobs(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


CLASSES = _knob_classes()
NUMERIC = [
    pytest.param(knob_spec, id=f"{cls.__name__}.{knob_spec.path}")
    for cls in CLASSES
    for knob_spec in specs(cls)
    if knob_spec.is_numeric
]


def _text(knob_spec: Spec, value: float) -> str:
    """`value` as a variable or flag would hold it."""
    return str(int(value)) if knob_spec.base is int else repr(float(value))


def _outside(knob_spec: Spec) -> list[float]:
    """Values just past each bound."""
    about = knob_spec.about
    step = 1 if knob_spec.base is int else 0.5
    values = []
    if "ge" in about:
        values.append(about["ge"] - step)
    if "gt" in about:
        values.append(about["gt"])
    if "le" in about:
        values.append(about["le"] + step)
    if "lt" in about:
        values.append(about["lt"])
    return values


def test_the_walk_finds_the_knobs_of_every_command() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"Settings", "DeployOptions", "GkeInputs", "ElasticityInputs", "ClusterSettings"} <= names
    assert len(NUMERIC) > 100


@pytest.mark.parametrize("knob_spec", NUMERIC)
def test_a_numeric_knob_refuses_what_is_outside_its_range(knob_spec: Spec) -> None:
    assert knob_spec.limits, f"{knob_spec.path} states no range"
    absurd = "99999999999999999999" if knob_spec.base is int else "1e300"
    for raw in [*(_text(knob_spec, v) for v in _outside(knob_spec)), absurd]:
        with pytest.raises(InvalidInput) as caught:
            parse_all([(knob_spec, raw, knob_spec.flag)])
        [problem] = caught.value.problems
        assert problem.field == knob_spec.flag
        assert repr(raw) in problem.problem
        assert knob_spec.limits in problem.fix, problem.fix
        assert problem.fix.startswith("use "), problem.fix


@pytest.mark.parametrize("knob_spec", NUMERIC)
def test_a_numeric_knob_takes_its_bounds_and_its_default(knob_spec: Spec) -> None:
    about = knob_spec.about
    inside = [about[key] for key in ("ge", "le") if key in about]
    if knob_spec.default is not None:
        inside.append(knob_spec.default)
    for value in inside:
        parsed = parse_all([(knob_spec, _text(knob_spec, value), knob_spec.flag)])
        assert parsed[knob_spec.path] == value


def test_a_number_without_a_range_cannot_be_declared() -> None:
    @dataclasses.dataclass(frozen=True)
    class Unbounded:
        above_only: int = knob(3, ge=0, help="A count.")

    with pytest.raises(TypeError, match=r"above_only \(--above-only\) is a number without a range"):
        specs(Unbounded)


def test_serve_help_states_every_range() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    rows = option_rows(result.output)
    for knob_spec in specs(Settings):
        if knob_spec.limits:
            assert f"({knob_spec.limits})" in rows[knob_spec.flag], rows[knob_spec.flag]


def test_serve_refuses_an_absurd_value_before_it_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            EOPS,
            "serve",
            "--data-dir",
            str(tmp_path),
            "--port",
            "0",
            "--max-wait-seconds",
            "99999999999999999999",
        ],
        capture_output=True,
        text=True,
        env=base_env({"EOPS_HEADROOM_SYNC": "1e300"}),
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--max-wait-seconds: invalid value '99999999999999999999'" in done.stderr
    assert "use a whole number 0 to 86400" in done.stderr
    assert "EOPS_HEADROOM_SYNC: invalid value '1e300'" in done.stderr, "every bad value at once"
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "eops.db").exists()
