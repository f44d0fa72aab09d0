"""Which waiting pod a node that frees goes to, as kube-scheduler 1.36's queue decides it
(pkg/scheduler/backend/queue: scheduling_queue.go, backoff_queue.go; `pending_order =
"kube-scheduler"`).

What the model keeps of it, for pods of one priority that fit any free GPU node:
- A pod that finds no node is *unschedulable*: its failed attempts count up, its timestamp is
  the time of the failure, and it waits in `unschedulablePods` for an event.
- A node that frees (a run ends, a new node gets its GPU) is such an event: every unschedulable
  pod moves, to the active queue if its back-off is over, else to the back-off queue. The
  back-off is 1 s doubled per failed attempt, at most 10 s, counted from the timestamp and cut
  to whole seconds (`alignToWindow`, SchedulerPopFromBackoffQ): a pod is past it from the
  second after.
- The active queue pops the oldest timestamp first. The first pod popped takes the node; the
  others fail again, each one attempt more, stamped now. Nodes that free at the same instant
  go down the same pass, one pod each.
- With the active queue empty, the back-off queue's head is popped at once (the same gate):
  the pod whose back-off ends first, the oldest timestamp among those of the same second.
- A pod left in the back-off queue is tried when its back-off ends; with no node free then (a
  node that frees always finds its pod at once here), it fails again, stamped then.

So a pod that has waited long has failed often and backs off for 10 s, and a freed node mostly
goes to a pod that failed only once or twice: newer pods first, but not strictly. Events that
free no node (a node that registers NotReady, its taint lifted before its GPU) also move pods in
the real scheduler; the model leaves them out. Placeholder pods are not in this queue: a freed
node goes to a waiting request first (engine.py)."""

from __future__ import annotations

import math

INITIAL_BACKOFF_S = 1.0  # kube-scheduler's podInitialBackoffSeconds default
MAX_BACKOFF_S = 10.0  # podMaxBackoffSeconds
_UNSCHEDULABLE = -1.0  # `backoff_until` of a pod in unschedulablePods


def backoff_s(attempts: int) -> float:
    """The back-off after `attempts` failed attempts (calculateBackoffDuration)."""
    if attempts <= 0:
        return 0.0
    return min(INITIAL_BACKOFF_S * 2.0 ** (attempts - 1), MAX_BACKOFF_S)


class SchedulerQueue:
    """The queue state of `size` pods (request ids 0..size-1), of those that wait."""

    def __init__(self, size: int) -> None:
        self.attempts = [0] * size
        self.stamp = [0.0] * size
        # the whole second a pod's back-off ends in while it sits in the back-off queue, else
        # _UNSCHEDULABLE (it waits for an event)
        self.backoff_until = [_UNSCHEDULABLE] * size
        self._pass_t = -math.inf
        self._pass: list[int] = []  # the active queue of the last pass, its head last

    def failed(self, pod: int, t: float) -> None:
        """`pod` found no node at t (it arrived, or came back from a preemption)."""
        self.attempts[pod] += 1
        self.stamp[pod] = t
        self.backoff_until[pod] = _UNSCHEDULABLE

    def pick(self, t: float, waiting: list[int], first: int) -> int:
        """The index in `waiting` (from `first` on: the waiting pods) of the pod that takes the
        node that frees at t."""
        if self._pass_t == t:
            while self._pass:
                pod = self._pass.pop()
                try:
                    return waiting.index(pod, first)
                except ValueError:
                    continue  # it took a node another way meanwhile
        self._end_pass()
        now = math.floor(t)
        active: list[tuple[float, int, int]] = []
        best_backoff: tuple[float, float, int] | None = None
        best_backoff_k = -1
        attempts, stamp, until = self.attempts, self.stamp, self.backoff_until
        for k in range(first, len(waiting)):
            pod = waiting[k]
            x = until[pod]
            if x != _UNSCHEDULABLE and now > x:
                # its back-off ended at second x + 1, when it was tried and found no node
                attempts[pod] += 1
                stamp[pod] = x + 1.0
                until[pod] = x = _UNSCHEDULABLE
            if x == _UNSCHEDULABLE:  # moved by this event
                x = float(math.floor(stamp[pod] + backoff_s(attempts[pod])))
                if now > x:
                    active.append((stamp[pod], pod, k))
                    continue
                until[pod] = x
            key = (x, stamp[pod], pod)
            if best_backoff is None or key < best_backoff:
                best_backoff, best_backoff_k = key, k
        if not active:
            return best_backoff_k
        active.sort()
        self._pass_t = t
        self._pass = [pod for _, pod, _ in reversed(active[1:])]
        return active[0][2]

    def moved(self, t: float, waiting: list[int], first: int) -> None:
        """An event at t that frees no node moves every unschedulable pod: those past their
        back-off are tried and fail, stamped t; the others wait in the back-off queue."""
        self._end_pass()
        now = math.floor(t)
        attempts, stamp, until = self.attempts, self.stamp, self.backoff_until
        for k in range(first, len(waiting)):
            pod = waiting[k]
            x = until[pod]
            if x != _UNSCHEDULABLE and now > x:
                attempts[pod] += 1
                stamp[pod] = x + 1.0
                until[pod] = x = _UNSCHEDULABLE
            if x == _UNSCHEDULABLE:
                x = float(math.floor(stamp[pod] + backoff_s(attempts[pod])))
                if now > x:
                    self.failed(pod, t)
                else:
                    until[pod] = x

    def _end_pass(self) -> None:
        """The active pods the last pass tried and that found no node: stamped then."""
        for pod in self._pass:
            self.failed(pod, self._pass_t)
        self._pass = []
