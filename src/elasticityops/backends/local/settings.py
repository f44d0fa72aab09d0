"""Typed settings of the local backend, each with its unit and default stated once; those made
with `knob()` are also `eops serve` flags and EOPS_* variables (elasticityops/knobs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elasticityops.knobs import knob

DEFAULT_VIRTUAL_SLOTS = 2


@dataclass(frozen=True)
class LocalBackendSettings:
    run_dir: Path
    """Parent of one directory per invocation (payload, log, result, exit status). Must survive a
    gateway restart: it is how a new gateway finds the jobs the old one started."""
    gpus: int | None = knob(
        None,
        env="EOPS_GPUS",
        unit="slots",
        ge=0,
        le=1024,
        shown=f"one per GPU nvidia-smi -L lists, else {DEFAULT_VIRTUAL_SLOTS} virtual",
        help="GPU slots of the local backend: N: the first N GPUs when the machine has at least N "
        "(and virtual is off), else N virtual slots; 0: as unset.",
    )
    virtual: bool = False
    """Use virtual slots even on a machine with GPUs (jobs then see CUDA_VISIBLE_DEVICES="")."""
    slot_provision_delay_s: float = knob(
        0.0,
        env="EOPS_COLD_START_SECONDS",
        unit="seconds",
        ge=0,
        le=3600,
        help="Delay before a cold slot's first job starts (local backend), as a cluster node being "
        "created; 0: none.",
    )
    slot_idle_timeout_s: float | None = knob(
        None,
        env="EOPS_IDLE_RELEASE_SECONDS",
        unit="seconds",
        ge=0,
        le=2_592_000,
        shown="never",
        help="Idle time after which a warm slot is released and goes cold again (local backend); 0: never.",
    )
    kill_grace_s: float = 5.0
    """Seconds between SIGTERM and SIGKILL when a job is cancelled or times out."""
    poll_interval_s: float = 0.05
    """Seconds between two looks at a job's run directory (milestones and exit status)."""
    max_result_bytes: int = 1024 * 1024
    """Largest result file read back (bytes); a bigger one is dropped and the invocation's
    message says so."""
    max_log_bytes: int = knob(
        64 * 1024 * 1024,
        env="EOPS_MAX_LOG_BYTES",
        unit="bytes",
        ge=1,
        le=68_719_476_736,
        help="Largest log kept per invocation (local backend); the job's output past it is dropped, "
        "with a note in the log saying how much.",
    )
    cgroups: bool = True
    """Track each job's processes by a cgroup of its own where the machine allows (cgroup v2,
    writable); False, or where it does not: by the supervisor's process tree (it is a child
    subreaper). See backends/local/tracking.py."""
    workdir: Path | None = None
    """Working directory of the jobs whose function has no `workdir` of its own. None: the
    gateway's working directory when the backend is created."""
