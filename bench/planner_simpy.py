"""The planner's cluster model written the plain SimPy way: one process per request, pending pods
as events a freed node succeeds, an autoscaler loop process, one process per provisioning node.

It follows the same rules as `elasticityops.planner.model.engine` (baseline pool, pending pods
served in `pending_order` (oldest, newest or a random one first), an empty node picked at
random, or first-fit (`empty_node_pick`), among those without the autoscaler's soft taint, else
among the tainted ones, up to `soft_taint_count` taints lifted or set per loop, GPU scale-up delay,
quota and pool limits, stockouts and back-off, provisioning timeouts, scale-down window /
parallelism / delays) and draws random numbers in the same order, so on a trace without
simultaneous events the two give the same start times.
Headroom policies and spot preemption are not implemented here (policy `none`, any baseline).
Used by bench/planner_speed.py (speed, side by side) and tests/planner (agreement).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from elasticityops.planner.settings import ClusterSettings


@dataclass(frozen=True)
class SimpyResult:
    start_s: list[float]
    node: list[int]
    node_created_s: list[float]
    node_deleted_s: list[float]
    horizon_s: float


def simulate_simpy(arrivals: Sequence[float], durations: Sequence[float], s: ClusterSettings) -> SimpyResult:
    if s.node_delete_time_s:
        raise NotImplementedError("the SimPy reference models instantaneous node deletion only")
    env = simpy.Environment()
    arr = list(arrivals)
    dur = list(durations)
    n = len(arr)
    rng = random.Random(s.seed)
    cap = s.autoscaled_cap
    base = s.baseline
    start = [-1.0] * n
    end = [0.0] * n
    node_of = [-1] * n
    created = [0.0] * base
    deleted = [math.inf] * base
    idle_since = [0.0] * base
    bfree = list(range(base - 1, -1, -1))
    empty: list[int] = []  # empty autoscaled nodes, longest idle first
    # the scheduler's view of them: without and with the soft taint, each list's order the one
    # the engine's pick relies on (a removal moves the last node into the gap)
    fresh: list[int] = []
    marked: list[int] = []
    tainted: set[int] = set()
    owed: list[int] = []  # tainted nodes a pod took
    place = random.Random(f"{s.seed}/placement")
    queue_pick = random.Random(f"{s.seed}/queue").random  # pending_order random

    def unlist(side: list[int], nd: int) -> None:
        k = side.index(nd)
        last = side.pop()
        if last != nd:
            side[k] = last

    ff = {"start": 0}  # first-fit: the node id where the scheduler's next search starts

    def first_fit() -> int:
        # kube-scheduler 1.36 as planner/model/empty_nodes.py describes it, written plainly: the
        # empty nodes in id order from the search's start, as many as the search finds, the first
        # unmarked among them, else the first; the start moves past them if it stopped early
        listed = base + st["alive"] - st["prov"]
        ids = sorted(empty)
        order = [x for x in ids if x >= ff["start"]] + [x for x in ids if x < ff["start"]]
        want = len(order)
        if want >= 100 and listed >= 100:
            want = min(want, max(listed * max(50 - listed // 125, 5) // 100, 100))
        found = order[:want]
        if want < len(order):
            ff["start"] = found[-1] + 1
        return next((x for x in found if x not in tainted), found[0])

    def take() -> int:
        if s.empty_node_pick == "first-fit":
            nd = first_fit()
            side = marked if nd in tainted else fresh
        else:
            side = fresh or marked
            nd = side[int(place.random() * len(side))]
        unlist(side, nd)
        empty.remove(nd)
        if nd in tainted:
            owed.append(nd)
        return nd

    def soft_taints(budget: int) -> None:
        keep = []
        for nd in owed:
            if nd in empty or nd not in tainted:
                continue
            if budget > 0:
                tainted.discard(nd)
                budget -= 1
            else:
                keep.append(nd)
        owed[:] = keep
        for _ in range(min(budget, len(fresh))):
            nd = fresh[int(place.random() * len(fresh))]
            unlist(fresh, nd)
            tainted.add(nd)
            marked.append(nd)

    pending: deque[tuple[int, float, Any]] = deque()  # (request, pod created, event)
    st = {
        "busy": 0,
        "prov": 0,
        "alive": 0,
        "arrived": 0,
        "last_up": -math.inf,
        "last_fail": -math.inf,
        "backoff_until": -math.inf,
        "backoff": 0.0,
    }

    def fail_backoff(t: float) -> None:
        st["backoff"] = (
            s.backoff_initial_s
            if t - st["last_fail"] > s.backoff_reset_s
            else min(st["backoff"] * 2, s.backoff_max_s)
        )
        st["backoff_until"] = t + st["backoff"]
        st["last_fail"] = t

    def free(nd: int) -> None:
        if pending:
            if s.pending_order == "newest-first":
                _, _, ev = pending.pop()
            elif s.pending_order == "random":
                k = int(queue_pick() * len(pending))
                _, _, ev = pending[k]
                del pending[k]
            else:
                _, _, ev = pending.popleft()
            ev.succeed(nd)
        elif nd < base:
            bfree.append(nd)
        else:
            empty.append(nd)
            (marked if nd in tainted else fresh).append(nd)
            idle_since[nd] = env.now

    trigger = [env.event()]  # succeeded by the first pod to wait after a loop

    def job(r: int) -> Generator[Any, Any, None]:
        if bfree:
            nd = bfree.pop()
        elif empty:
            nd = take()
        else:
            ev = env.event()
            pending.append((r, env.now, ev))
            if not trigger[0].triggered:  # an unschedulable pod starts an autoscaler loop
                trigger[0].succeed()
            nd = yield ev
        start[r] = env.now
        node_of[r] = nd
        st["busy"] += 1
        yield env.timeout(dur[r])
        end[r] = env.now
        st["busy"] -= 1
        free(nd)

    def arrivals_proc() -> Generator[Any, Any, None]:
        for r in range(n):
            yield env.timeout(arr[r] - env.now)
            st["arrived"] += 1
            env.process(job(r))

    def provision(nd: int, delay: float, fails: bool) -> Generator[Any, Any, None]:
        yield env.timeout(delay)
        st["prov"] -= 1
        if fails:
            st["alive"] -= 1
            deleted[nd] = env.now
            fail_backoff(env.now)
        else:
            free(nd)

    def autoscaler() -> Generator[Any, Any, None]:
        # upstream's LoopTrigger: a loop at 0, then scan_interval_s after each loop or at once
        # when a pod turns unschedulable, whichever comes first
        while True:
            t = env.now
            need = len(pending) - st["prov"]
            if need > 0 and t >= st["backoff_until"]:
                oldest = pending[st["prov"]][1]
                if t - oldest >= s.gpu_scale_up_delay_s:
                    add = min(need, cap - st["alive"])
                    if add > 0:
                        if s.stockout_probability > 0.0 and rng.random() < s.stockout_probability:
                            fail_backoff(t)
                        else:
                            st["last_up"] = t
                            st["prov"] += add
                            st["alive"] += add
                            for _ in range(add):
                                nd = len(created)
                                created.append(t)
                                deleted.append(math.inf)
                                idle_since.append(t)
                                delay = s.provision_delay.sample(rng)
                                fails = delay > s.max_provision_time_s
                                env.process(provision(nd, s.max_provision_time_s if fails else delay, fails))
            if (
                empty
                and t - st["last_up"] >= s.scale_down_delay_after_add_s
                and t - st["last_fail"] >= s.scale_down_delay_after_failure_s
            ):
                removed = 0
                while (
                    empty
                    and removed < s.scale_down_parallelism
                    and t - idle_since[empty[0]] >= s.scale_down_after_s
                ):
                    nd = empty.pop(0)
                    unlist(marked if nd in tainted else fresh, nd)
                    tainted.discard(nd)
                    deleted[nd] = t
                    st["alive"] -= 1
                    removed += 1
            if s.soft_taint_count:
                soft_taints(s.soft_taint_count)
            if st["arrived"] >= n and st["busy"] == 0 and not pending and t >= s.horizon_s:
                return
            trigger[0] = env.event()
            yield env.any_of([env.timeout(s.scan_interval_s), trigger[0]])

    env.process(arrivals_proc())
    done = env.process(autoscaler())
    env.run(until=done)
    horizon = max([s.horizon_s, *end]) if n else s.horizon_s
    return SimpyResult(start, node_of, created, deleted, horizon)
