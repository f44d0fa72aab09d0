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
from math import floor  # a pick's index: as int() for a draw in [0, 1), and cheaper to call

NOT_EMPTY = -1  # slot of a node that is not in the pool
NO_NODE = -1  # what `oldest` answers for an empty pool (an int: the engine's loop tests it cheaply)


class EmptyNodes:
    """Empty autoscaled nodes: `fresh` (unmarked) and `marked` (soft-tainted) for the scheduler's
    pick, `queue` for the autoscaler's longest-idle-first scale-down.

    The engine's per-request path does `add` and `take` itself, on these attributes (a method
    call per request cost ~14% of the engine's instructions: BENCHMARKS.md, planner): the per-node
    arrays are public for that, none of the lists is ever rebound, and a change to either rule
    goes in engine.py as well.
    """

    __slots__ = ("epoch", "fresh", "idle_since", "marked", "owed", "pick", "queue", "slot", "tainted")

    def __init__(self, rng: random.Random, idle_since: list[float]) -> None:
        self.pick = rng.random  # every draw of the pool: the scheduler's picks, the taints' choice
        self.idle_since = idle_since  # per node, shared with the engine (written by `add`)
        self.fresh: list[int] = []
        self.marked: list[int] = []
        self.slot: list[int] = []  # per node: index in fresh or marked, NOT_EMPTY if not in the pool
        self.tainted = bytearray()  # per node: it carries the soft taint (empty or not)
        self.epoch: list[int] = []  # per node: bumped each time it becomes empty
        self.queue: deque[tuple[int, int]] = deque()  # (epoch, node), longest idle first
        self.owed: list[int] = []  # marked nodes a pod took: their taint is lifted when budget allows

    def __len__(self) -> int:
        return len(self.fresh) + len(self.marked)

    def __bool__(self) -> bool:
        return bool(self.fresh) or bool(self.marked)

    def reserve(self, nodes: int) -> None:
        """Room for the node ids below `nodes`: the engine reserves as it orders nodes, so that
        its written-out `add` needs no check."""
        grow = nodes - len(self.slot)
        if grow > 0:
            self.slot.extend([NOT_EMPTY] * grow)
            self.tainted.extend(bytes(grow))
            self.epoch.extend([0] * grow)

    def add(self, nd: int, t: float) -> None:
        """Node `nd` is empty from `t` (a run ended, it became ready, a placeholder left)."""
        if nd >= len(self.slot):
            self.reserve(nd + 1)
        side = self.marked if self.tainted[nd] else self.fresh
        self.slot[nd] = len(side)
        side.append(nd)
        self.idle_since[nd] = t
        self.epoch[nd] += 1
        self.queue.append((self.epoch[nd], nd))

    def take(self) -> int:
        """The scheduler's pick for a pod: a random unmarked empty node, else a random marked one
        (the caller knows the pool is not empty)."""
        side = self.fresh or self.marked
        nd = side[floor(self.pick() * len(side))]
        self._drop(side, nd)
        if side is self.marked:
            self.owed.append(nd)
        return nd

    def remove(self, nd: int) -> None:
        """Node `nd` is gone (deleted by scale-down, or preempted, empty or not): out of the pool,
        and no taint left to lift."""
        if nd < len(self.slot):
            if self.slot[nd] != NOT_EMPTY:
                self._drop(self.marked if self.tainted[nd] else self.fresh, nd)
            self.tainted[nd] = 0

    def _drop(self, side: list[int], nd: int) -> None:
        """Node `nd` leaves `side`, the list it is in: the last one takes its place (O(1))."""
        slot = self.slot
        k = slot[nd]
        last = side.pop()
        if last != nd:
            side[k] = last
            slot[last] = k
        slot[nd] = NOT_EMPTY

    def oldest(self) -> int:
        """The longest idle empty node, or NO_NODE; drops the stale entries in front of it."""
        queue, slot, epoch = self.queue, self.slot, self.epoch
        while queue:
            ep, nd = queue[0]
            if slot[nd] != NOT_EMPTY and epoch[nd] == ep:
                return nd
            queue.popleft()
        return NO_NODE

    def leaving_within(self, window: float, t: float, horizon: float) -> tuple[float, ...]:
        """Seconds until scale-down of the empty nodes that go within `horizon`, ascending: the
        queue holds them longest idle first, so the walk stops at the first that stays longer."""
        out: list[float] = []
        since, slot, epoch = self.idle_since, self.slot, self.epoch
        for ep, nd in self.queue:
            if slot[nd] == NOT_EMPTY or epoch[nd] != ep:
                continue
            left = since[nd] + window - t
            if left > horizon:
                break
            out.append(max(0.0, left))
        return tuple(out)

    def update_taints(self, budget: int) -> None:
        """The autoscaler's soft-taint step of one loop: lift the taint from marked nodes that got
        a pod, then mark random unmarked empty nodes, `budget` API calls for both. (One body, no
        helper per part or per node: it runs every loop.)"""
        slot, flag, owed = self.slot, self.tainted, self.owed
        if owed:
            # in the order the pods took them; forget those empty again (unneeded again: they
            # keep the taint) or gone
            kept: list[int] = []
            for nd in owed:
                if slot[nd] != NOT_EMPTY or not flag[nd]:
                    continue
                if budget > 0:
                    flag[nd] = 0
                    budget -= 1
                else:
                    kept.append(nd)
            owed[:] = kept  # in place: the engine holds the list
        fresh = self.fresh
        if budget > 0 and fresh:
            marked, pick = self.marked, self.pick
            for _ in range(min(budget, len(fresh))):
                k = floor(pick() * len(fresh))
                nd = fresh[k]
                last = fresh.pop()  # out of fresh: the last one takes its place (as _drop)
                if last != nd:
                    fresh[k] = last
                    slot[last] = k
                flag[nd] = 1
                slot[nd] = len(marked)
                marked.append(nd)
