"""Which GPU slots this machine offers: physical NVIDIA GPUs, or virtual slots without them."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from elasticityops.backends.local.settings import DEFAULT_VIRTUAL_SLOTS

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?$")


@dataclass(frozen=True)
class SlotDevice:
    index: int  # the slot number, EOPS_GPU_SLOT
    physical: int | None  # the NVIDIA device index; None for a virtual slot
    model: str  # "NVIDIA H100 80GB HBM3" or "virtual"


def parse_nvidia_smi_list(text: str) -> list[tuple[int, str]]:
    """(index, model) of each line `GPU 0: NVIDIA L4 (UUID: GPU-...)` of `nvidia-smi -L`."""
    found = []
    for line in text.splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            found.append((int(match.group(1)), match.group(2)))
    return found


def detect_gpus(timeout_s: float = 10.0) -> list[tuple[int, str]]:
    """The machine's NVIDIA GPUs; empty when nvidia-smi is absent or fails (no driver)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi_list(done.stdout) if done.returncode == 0 else []


def visible_gpus(
    detected: list[tuple[int, str]], cuda_visible_devices: str | None
) -> tuple[list[tuple[int, str]], str | None]:
    """The detected GPUs the gateway itself may use, after its own CUDA_VISIBLE_DEVICES (so a
    gateway started with `CUDA_VISIBLE_DEVICES=2,3` hands out GPUs 2 and 3, never 0), and a
    warning when the variable could not be followed. Indices only: UUIDs and MIG names are not
    matched against `nvidia-smi -L`, so then every GPU stays offered and the warning says so."""
    if cuda_visible_devices is None:
        return detected, None
    wanted = [part.strip() for part in cuda_visible_devices.split(",") if part.strip()]
    if not all(part.isdigit() for part in wanted):
        return detected, (
            f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} is not a list of GPU indices; "
            "offering every GPU nvidia-smi lists (use indices, e.g. 0,1)"
        )
    by_index = dict(detected)
    chosen = [(int(i), by_index[int(i)]) for i in dict.fromkeys(wanted) if int(i) in by_index]
    return chosen, None


def plan_slots(gpus: int | None, virtual: bool, detected: list[tuple[int, str]]) -> list[SlotDevice]:
    """The slots to offer, from the settings and what the machine has (see LocalBackendSettings).
    `gpus` None or 0: as many as the machine has (0 is what `--gpus` leaves unset)."""
    if gpus is not None and gpus < 0:
        raise ValueError(f"gpus must be 0 (auto) or more, got {gpus}")
    if gpus == 0:
        gpus = None
    if detected and not virtual and (gpus is None or gpus <= len(detected)):
        chosen = detected if gpus is None else detected[:gpus]
        return [SlotDevice(i, physical, model) for i, (physical, model) in enumerate(chosen)]
    count = gpus if gpus is not None else DEFAULT_VIRTUAL_SLOTS
    return [SlotDevice(i, None, "virtual") for i in range(count)]
