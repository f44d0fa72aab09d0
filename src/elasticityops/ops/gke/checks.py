"""`validate(GkeInputs)`: every refusal at once, each naming its flag and what to pass instead.
The checks go by topic (where, how many, which GPU, which names), in the order of the flags."""

from __future__ import annotations

import re

from elasticityops import knobs
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.ops.gke.inputs import GPU_SHAPES, REFUSED_MACHINE_TYPES, GkeInputs

_PROJECT_RE = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_CLUSTER_RE = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_IMAGE_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_RELEASE_CHANNELS = ("rapid", "regular", "stable")


def validate(inputs: GkeInputs) -> None:
    problems = [
        *_where_problems(inputs),
        *_size_problems(inputs),
        *_gpu_problems(inputs),
        *_name_problems(inputs),
    ]
    if problems:
        raise InvalidInput(problems=problems)


def _where_problems(inputs: GkeInputs) -> list[FieldProblem]:
    """The project, the region and its zones."""
    problems: list[FieldProblem] = []
    if not _PROJECT_RE.match(inputs.project):
        problems.append(
            FieldProblem(
                "project",
                f"{inputs.project!r} is not a GCP project id",
                "use 6-30 lower-case letters, digits or hyphens, starting with a letter",
            )
        )
    if not _REGION_RE.match(inputs.region):
        problems.append(
            FieldProblem("region", f"{inputs.region!r} is not a GCP region", "write it like us-central1")
        )
    if not inputs.zones:
        problems.append(
            FieldProblem(
                "zones",
                "no zone given",
                "list the region's zones that offer the GPU, e.g. a,b,c or us-central1-a,us-central1-b",
            )
        )
    problems += [
        FieldProblem(
            "zones",
            f"{zone!r} is not a zone of {inputs.region}",
            f"write zones like {inputs.region}-a, or just the letters a,b,c",
        )
        for zone in inputs.zones
        if not re.match(rf"^{re.escape(inputs.region)}-[a-z]$", zone)
    ]
    if len(set(inputs.zones)) != len(inputs.zones):
        problems.append(FieldProblem("zones", "a zone is listed twice", "list each zone once"))
    return problems


MAX_PEAK = 1_000_000


def _size_problems(inputs: GkeInputs) -> list[FieldProblem]:
    """The peak, the baseline within it, and the margin above it (baseline and margin within the
    ranges their knobs declare, gke/inputs.py)."""
    problems = knobs.problems(inputs, where=lambda knob: knob.name)
    if not 1 <= inputs.peak <= MAX_PEAK:
        problems.append(
            FieldProblem(
                "peak",
                f"peak must be 1 to {MAX_PEAK} GPU nodes, got {inputs.peak}",
                "pass the most GPU nodes you expect at once, e.g. --peak 4000",
            )
        )
    elif inputs.baseline > inputs.peak:
        problems.append(
            FieldProblem(
                "baseline",
                f"baseline {inputs.baseline} is above the peak {inputs.peak}",
                "the baseline is part of the peak: lower it or raise --peak",
            )
        )
    return problems


def _gpu_problems(inputs: GkeInputs) -> list[FieldProblem]:
    """The GPU, its fallback, and the machine that carries it."""
    problems: list[FieldProblem] = []
    if inputs.gpu_type not in GPU_SHAPES:
        problems.append(
            FieldProblem(
                "gpu-type",
                f"{inputs.gpu_type!r} is not supported by this render",
                f"use one of: {', '.join(GPU_SHAPES)}",
            )
        )
    fallback = inputs.fallback_gpu_type
    if fallback is not None and (fallback not in GPU_SHAPES or fallback == inputs.gpu_type):
        problems.append(
            FieldProblem(
                "fallback-gpu-type",
                f"{fallback!r} cannot be the fallback",
                f"use one of {', '.join(t for t in GPU_SHAPES if t != inputs.gpu_type)}, or none",
            )
        )
    machine = _machine_problem(inputs)
    return problems if machine is None else [*problems, machine]


def _machine_problem(inputs: GkeInputs) -> FieldProblem | None:
    """A machine that starves the GPU, or one the GPU does not attach to."""
    if inputs.machine in REFUSED_MACHINE_TYPES:
        return FieldProblem(
            "machine-type", REFUSED_MACHINE_TYPES[inputs.machine], "pass --machine-type n1-standard-4"
        )
    shape = GPU_SHAPES.get(inputs.gpu_type)
    if shape is None:
        return None
    family = shape.machine_type.split("-")[0]
    if inputs.machine.startswith(f"{family}-"):
        return None
    return FieldProblem(
        "machine-type",
        f"{inputs.gpu_type} attaches only to {family} machines, not {inputs.machine}",
        f"pass --machine-type {shape.machine_type}",
    )


def _name_problems(inputs: GkeInputs) -> list[FieldProblem]:
    """The cluster's name, the preload disk image's and the release channel's."""
    problems: list[FieldProblem] = []
    if not _CLUSTER_RE.match(inputs.cluster):
        problems.append(
            FieldProblem(
                "cluster",
                f"{inputs.cluster!r} is not a valid cluster name",
                "use up to 40 lower-case letters, digits or hyphens, starting with a letter",
            )
        )
    if inputs.preload_disk_image is not None and not _IMAGE_RE.match(inputs.preload_disk_image):
        problems.append(
            FieldProblem(
                "preload-disk-image",
                f"{inputs.preload_disk_image!r} is not a Compute Engine image name",
                "pass the image built by gke-disk-image-builder, e.g. eops-fn-images-v3",
            )
        )
    if inputs.release_channel not in _RELEASE_CHANNELS:
        problems.append(
            FieldProblem(
                "release-channel",
                f"unknown channel {inputs.release_channel!r}",
                "use rapid, regular or stable",
            )
        )
    return problems
