"""The discrete-event model of a GPU cluster under the cluster autoscaler, on a virtual clock.

Pure: no wall clock, no I/O; the only randomness is a `random.Random(settings.seed)`.

The world, one GPU per node and one request per node:
- Requests arrive in trace order. An arrival takes, in this order, a free baseline node, an empty
  autoscaled node as the scheduler picks it (at random or the first in its list, as
  `empty_node_pick` says, preferring those without the autoscaler's soft taint: empty_nodes.py),
  or a node held by a placeholder pod (preempting it;
  the placeholder becomes pending). Otherwise it waits (in pod creation order; which waiting
  request a freed node serves is `pending_order`'s).
- A node that frees (request ended, or node became ready) goes to a waiting request (the oldest,
  the newest or a random one: `pending_order`), else to a pending placeholder (autoscaled nodes
  only), else it is empty.
- The autoscaler loop runs at t = 0, then `scan_interval_s` after each loop, and at once when a
  pod turns unschedulable (a request or a placeholder that finds no free node), as upstream's
  LoopTrigger does (cluster-autoscaler 1.36 loop/trigger.go; measured in BENCHMARKS.md, "Planner
  vs upstream autoscaler"): there is no fixed grid, so an isolated request into an empty cluster
  gets its scale-up exactly `gpu_scale_up_delay_s` after it arrives when that is a multiple of
  the scan interval. Each loop: first the headroom controller when due (`size_headroom`, on its
  own grid of `headroom_interval_s`), then scale-up and scale-down. Scale-up: pending pods not
  covered by nodes already provisioning are served by new nodes, once the oldest uncovered pod is
  `gpu_scale_up_delay_s` old, within quota and pool limits and outside back-off. Scale-down:
  empty autoscaled nodes idle for `scale_down_after_s`, oldest first, at most
  `scale_down_parallelism` deletions in flight (each takes `node_delete_time_s`; with 0, that
  many per loop), not within the delays after a scale-up or a failure. Then, every loop, the
  soft taints: up to `soft_taint_count` lifted from marked nodes that got a pod, then set on
  random unmarked empty nodes.
- Events at the same instant: request ends, then node events, then arrivals; all events at or
  before a loop's time are handled before that loop.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Sequence

from elasticityops.domain.headroom.run_times import RUN_TIME_SHARES, RunCohort
from elasticityops.domain.headroom.sizing import (
    HeadroomObservation,
    HeadroomPolicy,
    NoHeadroom,
    StaticBaseline,
    WaitTargetHeadroom,
    WarmHeadroom,
    size_headroom,
)
from elasticityops.planner.distributions import Distribution
from elasticityops.planner.model.empty_nodes import NO_NODE, NOT_EMPTY, EmptyNodes
from elasticityops.planner.model.result import SimResult, SimTimeSeries
from elasticityops.planner.settings import PENDING_ORDERS, ClusterSettings

_READY, _FAIL, _PREEMPT = 0, 1, 2
_FIFO, _NEWEST = PENDING_ORDERS.index("fifo"), PENDING_ORDERS.index("newest-first")
_INF = math.inf
_STALL_S = 400 * 86_400.0  # a model that runs this far past the last arrival is stuck
_LEAD_SAMPLES = 100  # node provisioning times averaged into the measured lead time
_COMPACT_AFTER = 65_536  # consumed entries at the front of a FIFO list before it is compacted
# The arrival trend is also measured over these shares of the trend window (the sizing picks
# the shortest it can trust: domain/headroom/sizing.py trend_for), the whole one last.
_TREND_SHARES = (0.25, 0.5, 1.0)


class ModelStalledError(RuntimeError):
    """The cluster can never serve the waiting requests (e.g. every node fails to provision)."""


# One function on purpose (complexity 45, above the C90 bound): its per-request path is inline
# local-variable code, and calls cost. Measured (BENCHMARKS.md, planner, 2026-12-01): a nested
# function to start a run cost +8.5% instructions and 7-9% CPU time; rare events already call the
# helpers below, where a call costs nothing measurable.
def simulate(  # noqa: C901
    arrivals: Sequence[float],
    durations: Sequence[float],
    settings: ClusterSettings,
    policy: HeadroomPolicy | None = None,
) -> SimResult:
    """Replay requests (arrival times sorted ascending, seconds; durations in seconds)."""
    policy = policy if policy is not None else NoHeadroom()
    arr = list(map(float, arrivals))
    dur = list(map(float, durations))
    n = len(arr)
    if len(dur) != n:
        raise ValueError("arrivals and durations differ in length")
    s = settings
    if n:
        _refuse_hopeless(s)
    cap = s.autoscaled_cap
    prov = s.provision_delay
    rng = random.Random(s.seed)
    scan = s.scan_interval_s
    gpu_delay = s.gpu_scale_up_delay_s
    max_prov = s.max_provision_time_s
    window = s.scale_down_after_s
    parallel = s.scale_down_parallelism
    delete_time = s.node_delete_time_s
    deleting: deque[float] = deque()  # finish times of deletions in flight
    delay_add = s.scale_down_delay_after_add_s
    delay_fail = s.scale_down_delay_after_failure_s
    stockout = s.stockout_probability
    preempt_rate = s.preemption_rate_per_hour / 3600.0
    baseline = s.baseline

    start = [-1.0] * n
    end = [0.0] * n
    node_of = [-1] * n
    restarts = [0] * n
    created = [0.0] * baseline
    ready_at = [0.0] * baseline
    deleted = [_INF] * baseline
    running = [-1] * baseline  # request on each node, -1 if none
    idle_since = [0.0] * baseline

    bfree = list(range(baseline - 1, -1, -1))  # free baseline nodes (stack)
    # empty autoscaled nodes: the scheduler's pick among them, their soft taints, their idle order
    empty = EmptyNodes(random.Random(f"{s.seed}/placement"), idle_since, s.empty_node_pick)
    first_fit = empty.first_fit  # its pick and its `add` keep sorted lists: the pool's own methods
    # its state, which the per-request path reads and writes itself (the pool's `add` and `take`
    # written out below; none of it is ever rebound)
    fresh, marked, owed = empty.fresh, empty.marked, empty.owed
    slot, tainted, epoch = empty.slot, empty.tainted, empty.epoch
    pick, queue = empty.pick, empty.queue
    floor = math.floor  # the pick's index: as int() for a draw in [0, 1), and cheaper to call
    queue_append = queue.append
    soft_taints = s.soft_taint_count
    warm: list[int] = []  # autoscaled nodes holding a placeholder
    ph_pend: list[float] = []  # creation times of pending placeholders
    ph_head = 0
    pend: list[int] = []  # waiting requests
    pend_t: list[float] = []  # their pod creation times
    head = 0
    # The runs' end times: a heap of plain floats, and the run that ends at each. A heap of
    # (end, run) tuples compared tuples at every step of every push and pop (6% more of the engine's
    # instructions, BENCHMARKS.md, planner); runs that end at the same instant still end in the
    # order of their ids, as the tuples had them (_end_tied, _next_tied).
    ends: list[float] = [_INF]  # never empty: a run that never ends is never next
    run_ending: dict[float, int] = {}  # end time -> the run that ends then (one of them on a tie)
    tied: dict[float, list[int]] = {}  # end time -> the other runs that end then (a heap of ids)
    misc: list[tuple[float, int, int]] = []
    tm = _INF  # the next node event's time (misc[0][0]), kept as misc changes

    busy = 0
    busy_s = 0.0
    provisioning = 0
    auto_alive = 0  # autoscaled nodes provisioning or ready
    peak = baseline
    quota_hits = failures = timeouts = preemptions = 0
    last_up = last_fail = -_INF
    backoff_until = -_INF
    backoff = 0.0
    push, pop = heapq.heappush, heapq.heappop

    constant = isinstance(policy, NoHeadroom | StaticBaseline | WarmHeadroom)
    target = size_headroom(HeadroomObservation(0.0, 0.0, 0.0), policy) if constant else 0
    next_hr = 0.0
    last_hr = -_INF  # the previous sizing's time
    rate_window = s.rate_window_s
    slow_window = s.slow_window_s
    trend_window = s.trend_window_s
    done_t: list[float] = []  # completion times, in order (for the recent departure rate)
    # headroom decision times and the running total of the busy nodes seen at them: the mean
    # busy nodes over any recent window, as a controller sampling its cluster would have it
    seen_t: list[float] = []
    seen_busy = [0]
    run_times: RunCohort[int] = RunCohort(s.run_time_window_s, s.run_time_min_ended, RUN_TIME_SHARES)
    # Only a policy sized at run time reads the run-time cohort and the completion times; for
    # the fixed ones the cohort's three calls and one object per request were most of a run's
    # cost over 385784e (BENCHMARKS.md, planner).
    track_runs = not constant
    # arrival times of the requests that started later than the policy's target wait (kept in
    # arrival order): the controller's own measure of how it is doing
    waits = policy if isinstance(policy, WaitTargetHeadroom) else None  # the predictive rules
    late_after = waits.target_wait_s if waits else _INF
    late_arr: list[float] = []
    # which waiting request a freed node goes to: the oldest (pend[head]), the newest (the end) or
    # a random one; pend_t stays in creation order either way, its front the oldest waiting
    order = PENDING_ORDERS.index(s.pending_order)
    queue_pick = random.Random(f"{s.seed}/queue").random
    feedback_window = s.feedback_window_s
    first_ready = 0.0 if baseline else _INF  # when the cluster first had a node
    # provisioning times of the last nodes that became ready: what a controller measures
    prov_seen: deque[float] = deque(maxlen=_LEAD_SAMPLES)
    reaction = gpu_delay + scan  # pending placeholder to scale-up decision, at most
    prior_lead = waits.lead_time_s if waits else 0.0
    timeline = SimTimeSeries([], [], [], [], [], [])
    next_tl = 0.0
    tl_step = s.timeline_step_s

    def fail_backoff(t: float) -> None:
        nonlocal backoff, backoff_until, last_fail
        backoff = (
            s.backoff_initial_s if t - last_fail > s.backoff_reset_s else min(backoff * 2, s.backoff_max_s)
        )
        backoff_until = t + backoff
        last_fail = t

    i = 0
    last_arrival = arr[-1] if n else 0.0
    arr.append(_INF)  # after the last arrival, the next one never comes (the helpers read arr[:i])
    next_arr = arr[0]
    t_scan = 0.0  # the next autoscaler loop (upstream: a timer, or a pod turning unschedulable)
    while True:
        # ---- events up to and including this autoscaler loop --------------------------------
        # An event is done within its branch (`continue`: a node that frees while nothing waits
        # idles there) or leaves node nd free at t for request r (r < 0: for the oldest waiting
        # request); the code after the branches hands the node over, so that runs start in one
        # place, inline: a call per run costs 5-9%.
        while True:
            te = ends[0]
            if te <= next_arr and te <= tm:
                if te > t_scan:
                    break
                pop(ends)
                r = _next_tied(te, run_ending, tied) if tied else run_ending.pop(te)
                if end[r] != te:  # stale: the run was cut by a preemption
                    continue
                nd = node_of[r]
                busy -= 1
                if track_runs:
                    done_t.append(te)
                    run_times.ended(r, te)
                t = te
                if head == len(pend):  # nothing waits: the node idles (most ends, so inline)
                    running[nd] = -1
                    if nd < baseline:
                        bfree.append(nd)
                    elif ph_head < len(ph_pend):
                        warm.append(nd)
                        ph_head += 1
                    elif first_fit:
                        empty.add(nd, t)
                    else:  # EmptyNodes.add written out (the engine reserved its node ids)
                        side = marked if tainted[nd] else fresh
                        slot[nd] = len(side)
                        side.append(nd)
                        idle_since[nd] = t
                        ep = epoch[nd] + 1
                        epoch[nd] = ep
                        queue_append((ep, nd))
                    continue
                r = -1
            elif tm <= next_arr:
                if tm > t_scan:
                    break
                t, kind, nd = pop(misc)
                tm = misc[0][0] if misc else _INF
                if kind == _READY:
                    provisioning -= 1
                    ready_at[nd] = t
                    prov_seen.append(t - created[nd])
                    first_ready = min(first_ready, t)
                    if preempt_rate > 0.0:
                        push(misc, (t + rng.expovariate(preempt_rate), _PREEMPT, nd))
                        tm = misc[0][0]
                    if head == len(pend):  # nothing waits: a pending placeholder's, or empty
                        if ph_head < len(ph_pend):
                            warm.append(nd)
                            ph_head += 1
                        else:
                            empty.add(nd, t)
                        continue
                    r = -1
                elif kind == _FAIL:
                    provisioning -= 1
                    auto_alive -= 1
                    deleted[nd] = t
                    timeouts += 1
                    fail_backoff(t)
                    continue
                else:  # preemption of a ready spot node
                    if deleted[nd] != _INF:
                        continue
                    deleted[nd] = t
                    auto_alive -= 1
                    preemptions += 1
                    r = running[nd]
                    empty.remove(nd)
                    if r < 0:  # it was empty, or held a placeholder, which is pending again
                        was_warm = nd in warm
                        if was_warm:
                            warm.remove(nd)
                            ph_pend.append(t)
                        ph_head = _hold_placeholders(
                            empty, warm, ph_pend, ph_head, baseline + auto_alive - provisioning
                        )
                        if was_warm and ph_head < len(ph_pend):
                            t_scan = t  # an unschedulable placeholder triggers a loop
                        continue
                    running[nd] = -1
                    busy -= 1
                    busy_s -= end[r] - t
                    end[r] = -1.0
                    if track_runs:
                        run_times.dropped(r)
                    restarts[r] += 1
                    # r waits again, behind those already waiting; as nothing waits while a node
                    # is free, a free node means r restarts on it at once
                    if not (bfree or fresh or marked or warm):
                        pend.append(r)
                        pend_t.append(t)
                        t_scan = t  # an unschedulable pod triggers a loop
                        continue
                    if not (bfree or fresh or marked):
                        t_scan = t  # r takes a placeholder's node: the placeholder is pending
                    nd = _take_free_node(bfree, empty, warm, ph_pend, t, baseline + auto_alive - provisioning)
            else:
                if next_arr > t_scan:
                    break
                # ---- arrival: a free node at once, else wait ----
                # (the order of _take_free_node, written out: a call per request costs ~2% more)
                t = next_arr
                r = i
                i += 1
                next_arr = arr[i]
                if bfree:
                    nd = bfree.pop()
                elif first_fit and (fresh or marked):
                    nd = empty.take(baseline + auto_alive - provisioning)
                elif fresh or marked:
                    # EmptyNodes.take written out: a random unmarked node, else a random marked
                    # one, which then owes an unmarking; the last node of its list fills its slot
                    side = fresh or marked
                    k = floor(pick() * len(side))
                    nd = side[k]
                    last = side.pop()
                    if last != nd:
                        side[k] = last
                        slot[last] = k
                    slot[nd] = NOT_EMPTY
                    if side is marked:
                        owed.append(nd)
                elif warm:
                    nd = warm.pop()
                    ph_pend.append(t)
                    t_scan = t  # the placeholder is pending again: a loop now
                else:
                    pend.append(r)
                    pend_t.append(t)
                    t_scan = t  # upstream's loop trigger: an unschedulable pod starts a loop
                    continue
                start[r] = t
            # ---- node nd is free at t: for r, or (r < 0) the oldest waiting request ----
            if r < 0:
                if order == _FIFO:  # settings.pending_order
                    r = pend[head]
                    head += 1
                elif order == _NEWEST:
                    r = pend.pop()
                    pend_t.pop()
                else:  # a random one: the others keep their (creation) order
                    k = head + floor(queue_pick() * (len(pend) - head))
                    r = pend.pop(k)
                    pend_t.pop(k)
                if start[r] < 0.0:  # a restart keeps the first start
                    start[r] = t
                    if t - arr[r] > late_after:
                        # in arrival order, as _late_share bisects it (only FIFO starts in it)
                        if order == _FIFO:
                            late_arr.append(arr[r])
                        else:
                            insort(late_arr, arr[r])
            # ---- request r runs on node nd from t (new, waiting, or restarted after a preemption)
            running[nd] = r
            node_of[r] = nd
            busy += 1
            d = dur[r]
            busy_s += d
            e = t + d
            end[r] = e
            push(ends, e)
            if e in run_ending:
                _end_tied(e, r, tied)
            else:
                run_ending[e] = r
            if track_runs:
                run_times.started(r, t)

        # ---- autoscaler loop at t_scan ---------------------------------------------------------
        t = t_scan
        if not constant and t >= next_hr:
            next_hr = (math.floor(t / s.headroom_interval_s) + 1) * s.headroom_interval_s
            slow_span = min(slow_window, max(t, rate_window))
            lead_now = reaction + sum(prov_seen) / len(prov_seen) if prov_seen else None
            lead_horizon = max(prior_lead, lead_now or 0.0)
            seen_t.append(t)
            seen_busy.append(seen_busy[-1] + busy)
            obs = HeadroomObservation(
                now_s=t,
                time_of_day_s=t % 86_400.0,
                arrival_rate_per_s=_recent_rate(arr, i, t, rate_window),
                rate_window_s=rate_window,
                departure_rate_per_s=_recent_rate(done_t, len(done_t), t, rate_window),
                busy_nodes=busy,
                free_nodes=len(bfree) + len(empty) + len(warm),
                pending_requests=len(pend) - head,
                provisioning_nodes=provisioning,
                placeholders_running=len(warm),
                placeholders_pending=len(ph_pend) - ph_head,
                # before a full slow window has passed, the rate over the time so far
                arrival_rate_slow_per_s=_recent_rate(arr, i, t, slow_span),
                busy_mean_slow=_mean_since(seen_t, seen_busy, t - slow_span),
                slow_window_s=slow_span,
                arrival_trend_per_s2=_rate_trend(arr, i, t, trend_window),
                arrival_trends=tuple(
                    (trend_window * f, _rate_trend(arr, i, t, trend_window * f)) for f in _TREND_SHARES
                ),
                # requests that came before any node could be ready are no measure of the sizing
                late_share=_late_share(
                    arr, i, late_arr, pend_t, head, t, min(feedback_window, t - first_ready), late_after
                )
                if t > first_ready
                else None,
                run_time_mean_s=run_times.mean_s(t),
                run_time_means=run_times.means(t),
                lead_time_s=lead_now,
                scale_down_in_s=empty.leaving_within(window, t, lead_horizon),
                history_s=t,
                since_last_s=t - last_hr if last_hr > -_INF else None,
            )
            last_hr = t
            target = size_headroom(obs, policy)
        held = len(warm) + len(ph_pend) - ph_head
        if target > held:
            ph_pend.extend([t] * (target - held))
            ph_head = _hold_placeholders(empty, warm, ph_pend, ph_head, baseline + auto_alive - provisioning)
        elif target < held:
            _drop_placeholders(held - target, t, warm, empty, ph_pend, ph_head)
        # -- scale-up
        real_p = len(pend) - head
        ph_p = len(ph_pend) - ph_head
        need = real_p + ph_p - provisioning
        if (
            need > 0
            and t >= backoff_until
            and t - _oldest_uncovered(pend_t, head, real_p, ph_pend, ph_head, ph_p, provisioning) >= gpu_delay
        ):
            k = min(need, cap - auto_alive)
            if k < need:
                quota_hits += 1
            if k > 0:
                if stockout > 0.0 and rng.random() < stockout:
                    failures += 1
                    fail_backoff(t)
                else:
                    last_up = t
                    provisioning += k
                    auto_alive += k
                    _order_nodes(
                        k, t, prov, max_prov, rng, misc, created, ready_at, deleted, running, idle_since
                    )
                    empty.reserve(len(created))
                    tm = misc[0][0]
                    if baseline + auto_alive > peak:
                        peak = baseline + auto_alive
        # -- scale-down
        while deleting and deleting[0] <= t:  # deletions finished: the quota slot is free again
            deleting.popleft()
            auto_alive -= 1
        oldest = NO_NODE
        if fresh or marked:  # the longest idle: the queue's front entry, unless it is stale
            ep, oldest = queue[0]
            if slot[oldest] == NOT_EMPTY or epoch[oldest] != ep:
                oldest = empty.oldest()  # which drops the stale entries in front
        if (
            oldest != NO_NODE
            and t - idle_since[oldest] >= window  # also checked here: most loops need no call
            and t - last_up >= delay_add
            and t - last_fail >= delay_fail
        ):
            auto_alive -= _scale_down(
                t, parallel - len(deleting), window, delete_time, empty, idle_since, deleted, deleting
            )
        # -- soft taints: every loop, cooldown or not (upstream's updateSoftDeletionTaints)
        if soft_taints and (fresh or owed):
            empty.update_taints(soft_taints)
        if t >= next_tl:
            next_tl = (math.floor(t / tl_step) + 1) * tl_step
            _sample(
                timeline,
                t,
                busy,
                len(pend) - head,
                baseline + auto_alive - provisioning,
                provisioning,
                target,
            )
        # Drop the consumed front of the FIFO lists now and then, so that memory stays bounded
        # while each request costs O(1) amortised.
        if head > _COMPACT_AFTER and head * 2 > len(pend):
            del pend[:head], pend_t[:head]
            head = 0
        if ph_head > _COMPACT_AFTER and ph_head * 2 > len(ph_pend):
            del ph_pend[:ph_head]
            ph_head = 0
        if i >= n and busy == 0 and head == len(pend) and t >= s.horizon_s:
            break
        if t > last_arrival + _STALL_S:
            raise ModelStalledError(
                f"requests still waiting {_STALL_S / 86400:.0f} days after the last arrival"
            )
        # upstream's LoopTrigger: the next loop one scan interval after this one, unless a pod
        # turns unschedulable before (above); the immediate loop after a scale-up finds nothing
        # new here (one loop adds every node needed), so it is not modelled
        t_scan = t + scan
        if (
            constant
            and head == len(pend)
            and ph_head == len(ph_pend)
            and len(warm) == target
            and not (provisioning or fresh or marked or deleting or owed)
        ):
            # Nothing waits, provisions or idles towards scale-down, and the headroom is fixed:
            # the loops before the next event change nothing but the timeline, so go to the last
            # one (which samples the idle state). A sparse trace then costs its requests, not its
            # span: three requests a year apart would be three million loops.
            t_scan = _last_loop_before(
                t_scan,
                scan,
                min(
                    next_arr,
                    ends[0],
                    tm,
                    s.horizon_s if s.horizon_s > t else _INF,
                ),
            )

    horizon = max(s.horizon_s, max(end)) if n else s.horizon_s
    return SimResult(
        start_s=start,
        end_s=end,
        node=node_of,
        restarts=restarts,
        node_created_s=created,
        node_ready_s=ready_at,
        node_deleted_s=deleted,
        baseline=baseline,
        horizon_s=horizon,
        busy_node_s=busy_s,
        peak_nodes=peak,
        quota_hits=quota_hits,
        scale_up_failures=failures,
        provision_timeouts=timeouts,
        preemptions=preemptions,
        timeline=timeline,
    )


# Helpers off the per-request path: each runs at most once per autoscaler loop or on a rare event
# (a preemption), so calling them costs nothing measurable (BENCHMARKS.md, planner).


def _last_loop_before(t_scan: float, scan: float, event: float) -> float:
    """The last loop time of the grid t_scan + k * scan (k >= 0) before `event`."""
    if event == _INF:
        return t_scan
    skip = math.ceil((event - t_scan) / scan) - 1
    return t_scan + skip * scan if skip > 0 else t_scan


def _refuse_hopeless(s: ClusterSettings) -> None:
    """Refuse, before simulating forever, settings under which no request could ever start."""
    if s.baseline > 0:
        return
    if s.autoscaled_cap <= 0:
        raise ModelStalledError("no capacity: the quota leaves no room for any node")
    if s.provision_delay.quantile(1e-9) > s.max_provision_time_s:
        raise ModelStalledError("every node exceeds max-provision-time; nothing can ever run")


def _order_nodes(
    k: int,
    t: float,
    prov: Distribution,
    max_prov: float,
    rng: random.Random,
    misc: list[tuple[float, int, int]],
    created: list[float],
    ready_at: list[float],
    deleted: list[float],
    running: list[int],
    idle_since: list[float],
) -> None:
    """k autoscaled nodes asked for at t, each ready after its sampled provisioning time or given
    up at max-provision-time (both node events in `misc`)."""
    for _ in range(k):
        nd = len(created)
        created.append(t)
        ready_at.append(_INF)
        deleted.append(_INF)
        running.append(-1)
        idle_since.append(t)
        delay = prov.sample(rng)
        if delay > max_prov:
            heapq.heappush(misc, (t + max_prov, _FAIL, nd))
        else:
            heapq.heappush(misc, (t + delay, _READY, nd))


def _end_tied(e: float, r: int, tied: dict[float, list[int]]) -> None:
    """Run r ends at `e`, as another run does already: it waits among the runs tied there."""
    heapq.heappush(tied.setdefault(e, []), r)


def _next_tied(te: float, run_ending: dict[float, int], tied: dict[float, list[int]]) -> int:
    """The run that ends at `te` with the smallest id (the tuple heap's order), and forget it."""
    others = tied.get(te)
    if others is None:
        return run_ending.pop(te)
    first = run_ending[te]
    if others[0] < first:
        r = heapq.heappop(others)
    else:
        r = first
        run_ending[te] = heapq.heappop(others)
    if not others:
        del tied[te]
    return r


def _take_free_node(
    bfree: list[int], empty: EmptyNodes, warm: list[int], ph_pend: list[float], t: float, listed: int
) -> int:
    """A free node for a request, which the caller knows there is: a baseline node, else an empty
    one as the scheduler picks it, else one holding a placeholder, which is pending again from t."""
    if bfree:
        return bfree.pop()
    if empty:
        return empty.take(listed)
    ph_pend.append(t)
    return warm.pop()


def _hold_placeholders(
    empty: EmptyNodes, warm: list[int], ph_pend: list[float], ph_head: int, listed: int
) -> int:
    """Pending placeholders take empty nodes (as the scheduler picks them, among `listed` nodes);
    returns the new head of the pending placeholders."""
    while empty and ph_head < len(ph_pend):
        warm.append(empty.take(listed))
        ph_head += 1
    return ph_head


def _drop_placeholders(
    drop: int,
    t: float,
    warm: list[int],
    empty: EmptyNodes,
    ph_pend: list[float],
    ph_head: int,
) -> None:
    """Remove `drop` placeholders: the newest pending ones first (no node to give back), then
    those holding nodes, whose nodes are empty from t."""
    cancel = min(drop, len(ph_pend) - ph_head)
    if cancel:
        del ph_pend[len(ph_pend) - cancel :]
    for _ in range(drop - cancel):
        empty.add(warm.pop(), t)


def _recent_rate(times: list[float], count: int, t: float, window: float) -> float:
    """Events per second over [t - window, t], from the first `count` of sorted `times`."""
    return (count - bisect_left(times, t - window, 0, count)) / window


def _late_share(
    arr: list[float],
    arrived: int,
    late_arr: list[float],
    pend_t: list[float],
    head: int,
    t: float,
    window: float,
    late_after: float,
) -> float | None:
    """Share of the requests that arrived within `window` before t that started, or are still
    waiting, later than `late_after` after arriving; None before any has arrived."""
    since = t - window
    count = arrived - bisect_left(arr, since, 0, arrived)
    if count == 0:
        return None
    late = len(late_arr) - bisect_left(late_arr, since)
    waiting_late = bisect_left(pend_t, t - late_after, head) - bisect_left(pend_t, since, head)
    return (late + max(0, waiting_late)) / count


def _mean_since(times: list[float], running_total: list[int], since: float) -> float:
    """Mean of the samples taken after `since` (at least the last one), from their times and
    running totals (running_total[k] is the sum of the first k samples)."""
    first = min(bisect_right(times, since), len(times) - 1)
    return (running_total[-1] - running_total[first]) / (len(times) - first)


def _rate_trend(times: list[float], count: int, t: float, window: float) -> float:
    """Change of the event rate per second: the rate over the last `window` less the rate over
    the one before, over `window`; 0 until two whole windows have passed."""
    if t < 2.0 * window:
        return 0.0
    now = _recent_rate(times, count, t, window)
    before = (
        bisect_left(times, t - window, 0, count) - bisect_left(times, t - 2.0 * window, 0, count)
    ) / window
    return (now - before) / window


def _oldest_uncovered(
    pend_t: list[float],
    head: int,
    real_p: int,
    ph_pend: list[float],
    ph_head: int,
    ph_p: int,
    provisioning: int,
) -> float:
    """Creation time of the oldest pending pod that no provisioning node will serve, as the
    autoscaler's young-pod filter counts: as many pods as nodes are on their way are covered
    (requests before placeholders), the oldest first, whichever of them a freed node serves."""
    if real_p > provisioning:
        oldest = pend_t[head + provisioning]
        if ph_p and ph_pend[ph_head] < oldest:
            return ph_pend[ph_head]
        return oldest
    return ph_pend[ph_head + provisioning - real_p]


def _scale_down(
    t: float,
    slots: int,
    window: float,
    delete_time: float,
    empty: EmptyNodes,
    idle_since: list[float],
    deleted: list[float],
    deleting: deque[float],
) -> int:
    """Delete up to `slots` empty nodes idle for `window`, longest idle first. Returns how many
    are gone at once; with a `delete_time` they hold their quota slot until `deleting` says."""
    gone = 0
    while slots > 0:
        nd = empty.oldest()
        if nd == NO_NODE or t - idle_since[nd] < window:
            break
        empty.remove(nd)
        slots -= 1
        if delete_time > 0.0:
            deleted[nd] = t + delete_time
            deleting.append(t + delete_time)
        else:
            deleted[nd] = t
            gone += 1
    return gone


def _sample(
    tl: SimTimeSeries, t: float, busy: int, waiting: int, ready: int, provisioning: int, headroom: int
) -> None:
    tl.t_s.append(t)
    tl.busy.append(busy)
    tl.demand.append(busy + waiting)
    tl.ready.append(ready)
    tl.provisioning.append(provisioning)
    tl.headroom.append(headroom)
