"""Typed settings of the local backend, each with its unit and default stated once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LocalBackendSettings:
    run_dir: Path
    """Parent of one directory per invocation (payload, log, result, exit status). Must survive a
    gateway restart: it is how a new gateway finds the jobs the old one started."""
    gpus: int | None = None
    """GPU slots (count). None or 0: one slot per NVIDIA GPU that `nvidia-smi -L` lists, or
    `DEFAULT_VIRTUAL_SLOTS` virtual slots when there is none. A number: the first N physical
    GPUs when the machine has at least N (and `virtual` is False), else N virtual slots."""
    virtual: bool = False
    """Use virtual slots even on a machine with GPUs (jobs then see CUDA_VISIBLE_DEVICES="")."""
    slot_provision_delay_s: float = 0.0
    """Seconds a cold slot takes to "provision" before its first job starts (0: none). Shows the
    same life as a cluster node being created."""
    slot_idle_timeout_s: float | None = None
    """Seconds a warm slot may stay idle before it is released and goes cold again
    (None or 0: never)."""
    kill_grace_s: float = 5.0
    """Seconds between SIGTERM and SIGKILL when a job is cancelled or times out."""
    poll_interval_s: float = 0.05
    """Seconds between two looks at a job's run directory (milestones and exit status)."""
    max_result_bytes: int = 1024 * 1024
    """Largest result file read back (bytes); a bigger one is dropped and the invocation's
    message says so."""
    workdir: Path | None = None
    """Working directory of the jobs. None: the gateway's working directory when the backend
    is created, so relative paths in a `command` (e.g. `examples/hello.py`) resolve as they do
    for the person who started `eops serve`."""


DEFAULT_VIRTUAL_SLOTS = 2
