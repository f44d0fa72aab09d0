"""What the Kubernetes backend follows of each invocation: the attempt its news is about, what of
it was reported already (observe.py's `Progress`), and the GPU type of the Job it has now.

The only memory the backend keeps of invocations; the watches' first lists rebuild it after a
restart. It decides no state (the store does): it keeps what an older attempt's Job, or one
withdrawn for a spill, says from being told as news of the invocation."""

from __future__ import annotations

from collections.abc import Sequence

from elasticityops.backends.kubernetes.labels import GPU_TYPE_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.observe import Progress
from elasticityops.domain.invocations import Invocation, State

_WITHDRAWN = ""  # the GPU type of an invocation whose Job is being withdrawn: every labelled one is stale


class Followed:
    def __init__(self) -> None:
        self.progress: dict[str, Progress] = {}
        # The GPU type of the Job each invocation has now (what it was launched on last): a Job or
        # pod labelled with another is one withdrawn for a spill, and what it does tells nothing.
        self.gpu_types: dict[str, str] = {}
        # The attempt `progress` is about, per invocation: the newest launched or seen. What a
        # Job or pod of an older attempt (preempted, being deleted) says is dropped.
        self.attempts: dict[str, int] = {}

    def launching(self, inv: str, attempt: int, gpu_type: str) -> None:
        self.current(inv, attempt)
        self.progress.setdefault(inv, Progress())
        self.gpu_types[inv] = gpu_type

    def current(self, inv: str, attempt: int) -> bool:
        """Whether an observation of `attempt` is about the attempt `progress` follows. A newer
        one than followed so far (launched by another gateway before a restart) replaces it."""
        followed = self.attempts.get(inv)
        if followed is not None and attempt < followed:
            return False
        if followed is not None and attempt > followed:
            self.progress.pop(inv, None)
        self.attempts[inv] = attempt
        return True

    def stale(self, inv: str, obj: KubeObject) -> bool:
        """A Job or pod of a GPU type the invocation no longer has a Job on: withdrawn."""
        kind = ((obj.get("metadata") or {}).get("labels") or {}).get(GPU_TYPE_LABEL)
        expected = self.gpu_types.get(inv)
        return kind is not None and expected is not None and kind != expected

    def withdrawing(self, inv: str) -> None:
        """Its Job is being withdrawn: whatever a Job or pod of it says is stale until it is
        launched again. No pending_since: the no-capacity sweep leaves it alone until then."""
        self.gpu_types[inv] = _WITHDRAWN
        self.progress[inv] = Progress(job_seen=True)

    def withdrawn(self, inv: str) -> bool:
        return self.gpu_types.get(inv) == _WITHDRAWN

    def supersede(self, inv: str, attempt: int) -> None:
        """Forget `attempt`: from now on whatever its Job or pod says is dropped, and the next
        attempt starts from nothing."""
        self.attempts[inv] = max(self.attempts.get(inv, 0), attempt + 1)
        self.progress.pop(inv, None)

    def forget(self, inv: str) -> None:
        self.progress.pop(inv, None)
        self.gpu_types.pop(inv, None)
        self.attempts.pop(inv, None)

    def to_relaunch(self, active: Sequence[Invocation]) -> list[str]:
        """The ids of `active` to launch again after a restart: those without a Job, and pending
        ones whose container has not started, since their payload Secret may never have been
        made if the gateway died between the two creates."""
        missing = []
        for inv in active:
            progress = self.progress.get(inv.id, Progress())
            if self.attempts.get(inv.id, 0) != inv.attempt:
                # What was seen is another attempt's Job (an older one, preempted): this
                # attempt's was never made.
                progress = Progress()
            if not progress.job_seen or (
                inv.state is State.pending and not progress.started and not progress.finished
            ):
                missing.append(inv.id)
        return missing
