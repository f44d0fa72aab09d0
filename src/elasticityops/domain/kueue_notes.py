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
# MultiKueue: the worker cluster that admitted it (the manager's Workload's status.clusterName).
DISPATCHED = "KueueDispatched"
# MultiKueue: what the Kueue of one worker said of its copy of the Workload ("worker-1: Kueue:
# ..."), one kind for every step there, so that a worker's steps never read as the manager's.
IN_WORKER = "KueueInWorker"
# MultiKueue: the manager's Workload stopped naming the worker that ran it (the worker lost, its
# work evicted to be admitted again): the run there may go on, and another may start elsewhere.
LEFT_WORKER = "KueueLeftWorker"
# MultiKueue with the gateway as its external dispatcher: the workers the gateway nominated for
# the work (the manager's Workload's status.nominatedClusterNames), and why.
NOMINATED = "KueueNominated"
# ...and a nomination the manager's API server refused for good (a Role without `patch` on
# workloads/status, a webhook's rejection): MultiKueue dispatches nothing until it is written.
NOT_NOMINATED = "KueueNotNominated"
# MultiKueue: one attempt's work ran in more than one worker (dispatched again after the manager
# took it back from a lost worker, whose run went on): a second run, shown, never hidden.
RAN_AGAIN = "KueueRanAgain"
# MultiKueue on Kueue v0.17.0: the manager's Job still counted a pod of a worker copy MultiKueue
# had deleted, which kept Kueue's eviction from finishing; the gateway cleared it (stale_jobs.py).
JOB_UNSTUCK = "KueueJobUnstuck"
KINDS = frozenset(
    {
        JOB_UNSTUCK,
        QUEUED,
        QUOTA_RESERVED,
        ADMISSION_CHECK,
        ADMITTED,
        EVICTED,
        DISPATCHED,
        IN_WORKER,
        LEFT_WORKER,
        NOMINATED,
        NOT_NOMINATED,
        RAN_AGAIN,
    }
)
