"""What `eops render gke` is given: its flags (`GkeInputs`) and the GPUs it knows how to carry."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.knobs import knob


@dataclass(frozen=True)
class GpuShape:
    """A GPU and the machine that carries one of it."""

    gpu_type: str
    machine_type: str
    vcpus: int
    memory_gb: int
    quota_metric: str
    spot_quota_metric: str


GPU_SHAPES: dict[str, GpuShape] = {
    "nvidia-tesla-t4": GpuShape(
        "nvidia-tesla-t4", "n1-standard-4", 4, 15, "NVIDIA_T4_GPUS", "PREEMPTIBLE_NVIDIA_T4_GPUS"
    ),
    "nvidia-l4": GpuShape(
        "nvidia-l4", "g2-standard-4", 4, 16, "NVIDIA_L4_GPUS", "PREEMPTIBLE_NVIDIA_L4_GPUS"
    ),
}

# Machine types that must never carry a GPU here, and why (the answer shown to the user).
REFUSED_MACHINE_TYPES: dict[str, str] = {
    "n1-standard-1": (
        "n1-standard-1 has 1 vCPU and 3.75 GB: data loading, decoding and the CUDA host threads starve the "
        "T4, which then idles; use n1-standard-4 (4 vCPU, 15 GB) for one T4"
    ),
    "n1-standard-2": (
        "n1-standard-2 (2 vCPU, 7.5 GB) still leaves a T4 waiting on the host for typical inference "
        "pre-processing; use n1-standard-4"
    ),
}


def _gpu_or_none(raw: object) -> str | None:
    text = "" if raw is None else str(raw).strip()
    return None if text in ("", "none") else text


@dataclass(frozen=True)
class GkeInputs:
    """What `eops render gke` renders; each knob is one of its flags (elasticityops/knobs.py).
    The limits are checks.validate()'s, whose messages say what to pass instead."""

    project: str
    region: str
    zones: tuple[str, ...]
    peak: int
    baseline: int = knob(
        60, unit="nodes", ge=0, le=1_000_000, help="Always-on GPU nodes for usual traffic (part of the peak)."
    )
    spot: bool = knob(False, off=None, help="Prefer spot VMs, fall back to on-demand.")
    gpu_type: str = knob("nvidia-tesla-t4", help=f"GPU model: {', '.join(GPU_SHAPES)}.")
    machine_type: str | None = knob(
        None,
        shown="n1-standard-4 for T4, g2-standard-4 for L4",
        help="Machine for one GPU; never n1-standard-1.",
    )
    fallback_gpu_type: str | None = knob(
        "nvidia-l4", parse=_gpu_or_none, help="GPU model to fall back to, or none."
    )
    cluster: str = knob("eops", help="Cluster name.")
    margin_pct: int = knob(
        10,
        flag="margin",
        unit="percent",
        ge=0,
        le=100,
        help="Margin above the peak for GPU limits and quota.",
    )
    preload_disk_image: str | None = knob(
        None, shown="none", help="Disk image with the function images, for a secondary boot disk."
    )
    release_channel: str = knob("regular", help="GKE release channel.")

    @property
    def machine(self) -> str:
        """`machine_type`, else the machine that carries one `gpu_type` (n1-standard-4 for one
        that is not known; checks.validate() refuses that GPU anyway)."""
        if self.machine_type is not None:
            return self.machine_type
        shape = GPU_SHAPES.get(self.gpu_type)
        return shape.machine_type if shape is not None else "n1-standard-4"


def expand_zones(region: str, zones: list[str]) -> tuple[str, ...]:
    """Accept `a,b,c` as well as full zone names."""
    return tuple(z if "-" in z else f"{region}-{z}" for z in (z.strip() for z in zones) if z)
