"""The checkout's example functions as a deploy from their files makes them: their commands
name files in examples/, which becomes their `workdir` (domain/spec_files.py), so they run
whatever directory a gateway runs in."""

from __future__ import annotations

from elasticityops.client import spec_from
from elasticityops.domain.functions import FunctionSpec
from helpers.server import REPO

EXAMPLES = REPO / "examples"


def example_spec(name: str) -> FunctionSpec:
    """examples/NAME.yaml as `eops fn deploy` sends it."""
    return spec_from(EXAMPLES / f"{name}.yaml")


def example_json(name: str) -> bytes:
    """The same, as the JSON body of PUT /v1/functions/NAME."""
    return example_spec(name).model_dump_json().encode()
