"""What the benchmarks record of the machine they ran on: the CPU model and memory as Linux
reports them (None where /proc does not say), one reader for every bench's `machine()`."""

from __future__ import annotations

from pathlib import Path


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
