"""The dispatcher's knobs: the GPU budget, batch sizes, event lanes, retries and the callback
the jobs post their results to."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.domain.budget import GpuBudget, parse_gpu_budget
from elasticityops.knobs import knob


@dataclass(frozen=True)
class DispatchSettings:
    server_secret: bytes
    """Key of the per-invocation callback tokens (`callback_token(server_secret, id)`)."""
    callback_base_url: str | None = None
    """Base URL jobs reach the gateway at, e.g. http://127.0.0.1:8080; the job gets
    `{base}/v1/invocations/{id}/result` as EOPS_CALLBACK_URL. None: no callback URL is given."""
    tick_s: float = knob(
        1.0,
        env="EOPS_DISPATCH_TICK_SECONDS",
        unit="seconds",
        gt=0,
        le=3600,
        help="Longest pause between two admission passes when nothing wakes the dispatcher.",
    )
    batch_size: int = 256
    """Queued invocations read at a time (count), in admission order; a full batch that
    admitted work is followed at once by another cycle."""
    scan_pages: int = 16
    """Most batches one cycle reads (count): past the first (in one read) only when the first
    waits for its own GPU type or function and shared capacity is left."""
    gpu_budget: GpuBudget | None = knob(
        None,
        env="EOPS_GPU_BUDGET",
        metavar="GPUS|TYPE=N,...",
        parse=parse_gpu_budget,
        shown="no cap: only the backend limits",
        help="Most GPUs in use at once, for any backend (a cluster's GPU quota): one number for all "
        "GPU types together, or one per type, e.g. nvidia-tesla-t4=8,nvidia-l4=2 (a type not "
        "listed is not capped). Work beyond it waits in admission order (priority, then the "
        "functions' turns).",
    )
    admission: str = knob(
        "gateway",
        env="EOPS_ADMISSION",
        choices=("gateway", "kueue"),
        help="Who decides when an invocation starts: gateway (its GPU budget, priorities and "
        "preemption) or kueue (kubernetes backend: each Job is created at once in "
        "--kube-local-queue and Kueue admits it by its ClusterQueue's quota; docs/kueue.md).",
    )
    kueue_max_jobs: int = knob(
        5000,
        env="EOPS_KUEUE_MAX_JOBS",
        unit="Jobs",
        ge=1,
        le=1_000_000,
        help="With --admission kueue: most invocations with a Job at once (waiting in Kueue or "
        "running), a safety cap on what the gateway hands the API server, not a quota (the "
        "ClusterQueue's is).",
    )
    paused: bool = knob(
        False,
        env="EOPS_DISPATCH_PAUSED",
        flag="paused",
        help="Accept and store invocations but admit none (maintenance; measuring the gateway "
        "alone); backend events are still handled.",
    )
    spill_after_seconds: float = knob(
        900.0,
        env="EOPS_SPILL_AFTER_SECONDS",
        unit="seconds",
        gt=0,
        le=2_592_000,
        help="How long a pending invocation of a function that lists several GPU types waits "
        "for a node of one before it moves to the next (the cluster autoscaler's "
        "max-node-provision-time is 15 min); a stockout, quota or NotTriggerScaleUp note moves "
        "it at once.",
    )
    event_retries: int = 5
    """Attempts to record one backend event when the store fails other than by being unavailable
    (count), with growing pauses; an unavailable store is waited for (_record_with_retries)."""
    event_wait_max_s: float = 5.0
    """Longest pause between tries of an event while the store is unavailable (seconds)."""
    launch_concurrency: int = 64
    """Most admissions (store transition + launch) in flight at once within one cycle (count)."""
    event_concurrency: int = 128
    """Most invocations whose backend events are being recorded at once (count); each one's
    events are recorded in the order they came."""
    drain_seconds: float = 10.0
    """On stop, how long to wait for backend events still being recorded (seconds); whatever
    is left is read again from the backend by the next start's adoption."""
