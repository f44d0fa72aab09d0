"""The empty autoscaled nodes, as kube-scheduler and the cluster autoscaler's soft taints see them.

Why this matters: which empty node a new pod lands on decides which nodes stay idle long enough
to be removed. A rehearsal on upstream's autoscaler (BENCHMARKS.md, "Rehearsal on a real-traffic
ramp") kept 175-203 nodes for ~100 busy where a model that reused the most recently emptied node
kept 99: the real scheduler spreads pods over identical empty nodes (a random pick among equal
scores), so a stream of short jobs keeps touching every one of them. What lets nodes go at all is
the autoscaler's soft taint: each loop it marks up to `--max-bulk-soft-taint-count` (10) unneeded
nodes `DeletionCandidateOfClusterAutoscaler:PreferNoSchedule`, after first lifting it from as many
marked nodes that got a pod since (core/scaledown/actuation/softtaint.go, one budget for both), and
the scheduler's TaintToleration score then prefers unmarked nodes, so the marked ones idle out.

The model: a pod (request or placeholder) takes a random unmarked empty node, else a random
marked one (which then owes an unmarking); `update_taints` is the autoscaler's per-loop step. The
scale-down order (longest idle first) is a queue of (epoch, node) entries, dropped lazily once a
node leaves the pool, so that every operation on the per-request path is O(1).
"""

from __future__ import annotations

import random
from collections import deque

_OUT = -1  # slot of a node that is not empty


class EmptyNodes:
    """Empty autoscaled nodes: `fresh` (unmarked) and `marked` (soft-tainted) for the scheduler's
    pick, `queue` for the autoscaler's longest-idle-first scale-down."""

    __slots__ = ("_epoch", "_in_marked", "_rng", "_slot", "fresh", "idle_since", "marked", "owed", "queue")

    def __init__(self, rng: random.Random, idle_since: list[float]) -> None:
        self._rng = rng
        self.idle_since = idle_since  # per node, shared with the engine (written by `add`)
        self.fresh: list[int] = []
        self.marked: list[int] = []
        self._slot: list[int] = []  # per node: index in fresh or marked, _OUT if not empty
        self._in_marked = bytearray()  # per node: it carries the soft taint (empty or not)
        self._epoch: list[int] = []  # per node: bumped each time it becomes empty
        self.queue: deque[tuple[int, int]] = deque()  # (epoch, node), longest idle first
        self.owed: list[int] = []  # marked nodes a pod took: their taint is lifted when budget allows

    def __len__(self) -> int:
        return len(self.fresh) + len(self.marked)

    def __bool__(self) -> bool:
        return bool(self.fresh) or bool(self.marked)

    def add(self, nd: int, t: float) -> None:
        """Node `nd` is empty from `t` (a run ended, it became ready, a placeholder left)."""
        slot = self._slot
        while len(slot) <= nd:
            slot.append(_OUT)
            self._in_marked.append(0)
            self._epoch.append(0)
        side = self.marked if self._in_marked[nd] else self.fresh
        slot[nd] = len(side)
        side.append(nd)
        self.idle_since[nd] = t
        self._epoch[nd] += 1
        self.queue.append((self._epoch[nd], nd))

    def take(self) -> int:
        """The scheduler's pick for a pod: a random unmarked empty node, else a random marked one
        (the caller knows the pool is not empty)."""
        side = self.fresh or self.marked
        nd = side[int(self._rng.random() * len(side))]
        self._drop(nd)
        if self._in_marked[nd]:
            self.owed.append(nd)
        return nd

    def remove(self, nd: int) -> None:
        """Node `nd` is gone (deleted by scale-down, or preempted, empty or not): out of the pool,
        and no taint left to lift."""
        if nd < len(self._slot):
            if self._slot[nd] != _OUT:
                self._drop(nd)
            self._in_marked[nd] = 0

    def _drop(self, nd: int) -> None:
        side = self.marked if self._in_marked[nd] else self.fresh
        k = self._slot[nd]
        last = side.pop()
        if last != nd:
            side[k] = last
            self._slot[last] = k
        self._slot[nd] = _OUT

    def _valid(self, entry: tuple[int, int]) -> bool:
        epoch, nd = entry
        return self._slot[nd] != _OUT and self._epoch[nd] == epoch

    def oldest(self) -> int | None:
        """The longest idle empty node, or None."""
        queue = self.queue
        while queue and not self._valid(queue[0]):
            queue.popleft()
        return queue[0][1] if queue else None

    def leaving_within(self, window: float, t: float, horizon: float) -> tuple[float, ...]:
        """Seconds until scale-down of the empty nodes that go within `horizon`, ascending: the
        queue holds them longest idle first, so the walk stops at the first that stays longer."""
        out: list[float] = []
        since = self.idle_since
        for entry in self.queue:
            if not self._valid(entry):
                continue
            left = since[entry[1]] + window - t
            if left > horizon:
                break
            out.append(max(0.0, left))
        return tuple(out)

    def update_taints(self, budget: int) -> None:
        """The autoscaler's soft-taint step of one loop: lift the taint from marked nodes that got
        a pod, then mark random unmarked empty nodes, `budget` API calls for both."""
        slot, flag = self._slot, self._in_marked
        if self.owed:
            kept: list[int] = []
            for nd in self.owed:
                if slot[nd] != _OUT or not flag[nd]:
                    continue  # empty again (unneeded again: it keeps its taint), or gone
                if budget > 0:
                    flag[nd] = 0
                    budget -= 1
                else:
                    kept.append(nd)
            self.owed = kept
        fresh, marked = self.fresh, self.marked
        for _ in range(min(budget, len(fresh))):
            nd = fresh[int(self._rng.random() * len(fresh))]
            self._drop(nd)  # while unmarked: out of the unmarked list
            flag[nd] = 1
            slot[nd] = len(marked)
            marked.append(nd)
