"""The note kinds of Kueue's steps on a workload, one per thing Kueue does to it, so that a
timeline names each step. Written by the Kubernetes backend, read by whatever explains a wait
(domain/wait_phases.py splits the wait for capacity at Kueue's admission, for the CLI and
the console alike)."""

from __future__ import annotations

QUEUED = "KueueQueued"
QUOTA_RESERVED = "KueueQuotaReserved"
ADMISSION_CHECK = "KueueAdmissionCheck"
ADMITTED = "KueueAdmitted"
EVICTED = "KueueEvicted"
KINDS = frozenset({QUEUED, QUOTA_RESERVED, ADMISSION_CHECK, ADMITTED, EVICTED})
