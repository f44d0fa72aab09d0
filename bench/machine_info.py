"""What the benchmarks record of the machine they ran on: the CPU model and memory as Linux
reports them (None where /proc does not say), one reader for every bench's `machine()`."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str | None:
    """The first `model name` of /proc/cpuinfo."""
    return _proc_field("/proc/cpuinfo", "model name")


def memory_gib() -> float | None:
    """MemTotal of /proc/meminfo, in GiB."""
    total = _proc_field("/proc/meminfo", "MemTotal")
    return int(total.split()[0]) / 1024 / 1024 if total else None


def machine() -> dict[str, Any]:
    """The machine as the timing benches record it beside their figures."""
    gib = memory_gib()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model() or platform.processor(),
        "memory_gib": None if gib is None else round(gib, 1),
        "loadavg_before": os.getloadavg(),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }
