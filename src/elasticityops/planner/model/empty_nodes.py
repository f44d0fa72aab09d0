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

Which of the equally scored empty nodes the scheduler takes depends on its version and its cores
(`empty_node_pick`):
- `random`: a random unmarked empty node, else a random marked one. kube-scheduler up to 1.34
  drew among the best scores at random; 1.35 and 1.36 take the first of its feasible list, but
  that list is filled by up to 16 filtering goroutines at once, and on a control plane with that
  many cores its order is in effect random (kubernetes/kubernetes#141024).
- `first-fit`: the first empty node in the scheduler's node list, counting from where its search
  starts, unmarked ones first: kube-scheduler 1.35-1.36 on a small control plane, where a couple
  of goroutines fill that list nearly in node order (measured on the dev cluster: 60 empty-or-busy
  GPU nodes, ~41 of them free at each start, 41% of the starts went to the first free node in
  name order and 85% to one of the first six, and 35 of the 60 nodes took all 210 starts; a
  random pick would have spread them over ~58; BENCHMARKS.md, "Which empty node a pod takes,
  again"). The node list is taken in the order the nodes were made (kube-scheduler interleaves
  zones, which this model does not know). The search starts where the last one stopped: when
  fewer empty nodes than it looks for are left (all of them below 100) it looks at every node
  and the start stays; else it stops at the `feasible_to_find`-th empty node and the next
  search starts after it (kube-scheduler's numFeasibleNodesToFind and nextStartNodeIndex).

A marked node a pod took owes an unmarking; `update_taints` is the autoscaler's per-loop step. The
scale-down order (longest idle first) is a queue of (epoch, node) entries, dropped lazily once a
node leaves the pool, so that every operation on the per-request path is O(1) (O(log n) and a
memmove for first-fit's sorted lists).
"""

from __future__ import annotations

import random
from bisect import bisect_left, insort
from collections import deque
from math import floor  # a pick's index: as int() for a draw in [0, 1), and cheaper to call

from elasticityops.planner.settings import EMPTY_NODE_PICKS

NOT_EMPTY = -1  # slot of a node that is not in the pool
NO_NODE = -1  # what `oldest` answers for an empty pool (an int: the engine's loop tests it cheaply)

# kube-scheduler 1.36 pkg/scheduler/schedule_one.go: it stops filtering once it has found this many
# feasible nodes (minFeasibleNodesToFind, minFeasibleNodesPercentageToFind, the adaptive share when
# percentageOfNodesToScore is unset)
_MIN_FEASIBLE = 100
_MIN_PERCENT = 5


def feasible_to_find(listed: int) -> int:
    """How many feasible nodes kube-scheduler looks for among `listed` nodes before it stops."""
    if listed < _MIN_FEASIBLE:
        return listed
    percent = max(50 - listed // 125, _MIN_PERCENT)
    return max(listed * percent // 100, _MIN_FEASIBLE)


class EmptyNodes:
    """Empty autoscaled nodes: `fresh` (unmarked) and `marked` (soft-tainted) for the scheduler's
    pick, `queue` for the autoscaler's longest-idle-first scale-down.

    The engine's per-request path does `add` and `take` itself, on these attributes (a method
    call per request cost ~14% of the engine's instructions: BENCHMARKS.md, planner): the per-node
    arrays are public for that, none of the lists is ever rebound, and a change to either rule
    goes in engine.py as well.
    """

    __slots__ = (
        "by_id",
        "epoch",
        "first_fit",
        "fresh",
        "idle_since",
        "marked",
        "owed",
        "pick",
        "queue",
        "slot",
        "start",
        "tainted",
        "unmarked_by_id",
    )

    def __init__(self, rng: random.Random, idle_since: list[float], pick: str = "random") -> None:
        if pick not in EMPTY_NODE_PICKS:
            raise ValueError(f"empty-node pick {pick!r}: one of {', '.join(EMPTY_NODE_PICKS)}")
        self.first_fit = pick == "first-fit"
        self.pick = rng.random  # every draw of the pool: the scheduler's picks, the taints' choice
        self.idle_since = idle_since  # per node, shared with the engine (written by `add`)
        self.fresh: list[int] = []
        self.marked: list[int] = []
        self.slot: list[int] = []  # per node: index in fresh or marked, NOT_EMPTY if not in the pool
        self.tainted = bytearray()  # per node: it carries the soft taint (empty or not)
        self.epoch: list[int] = []  # per node: bumped each time it becomes empty
        self.queue: deque[tuple[int, int]] = deque()  # (epoch, node), longest idle first
        self.owed: list[int] = []  # marked nodes a pod took: their taint is lifted when budget allows
        # first-fit only: the scheduler's order (node ids, ascending) of every empty node and of the
        # unmarked ones, and the id its next search starts from
        self.by_id: list[int] = []
        self.unmarked_by_id: list[int] = []
        self.start = 0

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
        if self.first_fit:
            insort(self.by_id, nd)
            if side is self.fresh:
                insort(self.unmarked_by_id, nd)

    def take(self, listed: int = 0) -> int:
        """The scheduler's pick for a pod (the caller knows the pool is not empty): a random
        unmarked empty node, else a random marked one; or with first-fit, the first as module's
        docstring says, `listed` being the nodes in the scheduler's list (ready, busy or not)."""
        if self.first_fit:
            nd = self._first(listed)
            side = self.marked if self.tainted[nd] else self.fresh
        else:
            side = self.fresh or self.marked
            nd = side[floor(self.pick() * len(side))]
        self._drop(side, nd)
        if side is self.marked:
            self.owed.append(nd)
        return nd

    def _first(self, listed: int) -> int:
        """First-fit's pick, out of the sorted lists: the first unmarked empty node from the
        search's start, if it is among the nodes the search finds, else the first empty node
        found; the start moves past what the search found when it stopped early."""
        every, unmarked = self.by_id, self.unmarked_by_id
        free = len(every)
        j = bisect_left(every, self.start)
        if j == free:  # the search wraps around the node list
            j = 0
        found = free if free < _MIN_FEASIBLE else min(free, feasible_to_find(max(listed, free)))
        nd = every[j]
        if unmarked:
            u = bisect_left(unmarked, self.start)
            first = unmarked[u] if u < len(unmarked) else unmarked[0]
            if found == free or (bisect_left(every, first) - j) % free < found:
                nd = first
        if found < free:
            self.start = every[(j + found - 1) % free] + 1
        self._unorder(nd)
        return nd

    def _unorder(self, nd: int) -> None:
        """First-fit: node `nd` leaves the pool's sorted lists (before its flag changes)."""
        self.by_id.pop(bisect_left(self.by_id, nd))
        if not self.tainted[nd]:
            self.unmarked_by_id.pop(bisect_left(self.unmarked_by_id, nd))

    def remove(self, nd: int) -> None:
        """Node `nd` is gone (deleted by scale-down, or preempted, empty or not): out of the pool,
        and no taint left to lift."""
        if nd < len(self.slot):
            if self.slot[nd] != NOT_EMPTY:
                self._drop(self.marked if self.tainted[nd] else self.fresh, nd)
                if self.first_fit:
                    self._unorder(nd)
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
            unmarked = self.unmarked_by_id if self.first_fit else None
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
                if unmarked is not None:
                    unmarked.pop(bisect_left(unmarked, nd))
