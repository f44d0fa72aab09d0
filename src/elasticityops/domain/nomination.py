"""Which MultiKueue worker the gateway nominates for a Workload when Kueue's dispatcher is an
external one (`multiKueue.dispatcherName` not Kueue's own): Kueue copies a Workload only to the
workers in its `status.nominatedClusterNames`, so nominating one worker at a time spares the
others a copy to make and delete (each through a 5-QPS client in Kueue v0.17.0).

One worker first: the one with the fewest of this gateway's Workloads still waiting to be
admitted there, passing over workers recently shunned (a Workload nominated there was not
admitted in time: a stocked-out region, a full quota, a worker lost). If no worker admits it
within `wait_s`, the next is nominated too, until every worker is; the ones that let it wait are
shunned for a while, so the work that follows goes elsewhere first. The wait counts from when
the worker got its copy (`wait_began`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SHUN_FACTOR = 10.0
"""A worker that let a Workload wait `wait_s` is passed over for SHUN_FACTOR times that."""


@dataclass(frozen=True)
class Nomination:
    clusters: tuple[str, ...]  # the whole list to write: what was nominated, and `added`
    added: str
    why: str  # for the timeline


def next_nomination(
    workers: Sequence[str],
    nominated: Sequence[str],
    since: float,
    now: float,
    waiting: Mapping[str, int],
    shunned_until: Mapping[str, float],
    wait_s: float,
    barred_until: Mapping[str, float] | None = None,
) -> Nomination | None:
    """The nomination to write now, or None. `nominated`: what the Workload names now, since
    `since` (when this gateway nominated it, or first saw it nominated); `waiting`: this
    gateway's Workloads nominated to each worker and not yet admitted; `barred_until`: workers
    MultiKueue took work back from (a stocked-out region, a lost worker), never added to a
    nomination until then (a first nomination takes one if nothing else is left)."""
    left = [w for w in sorted(workers) if w not in nominated]
    if nominated:
        # Added, it would likely admit the work again beside the other worker: two copies
        # admitted at once is what Kueue v0.17.0 handles worst (an eviction then leaves the
        # other copy deactivated for good, kueue#11452).
        left = [w for w in left if (barred_until or {}).get(w, 0.0) <= now]
    if not left or (nominated and now - since < wait_s):
        return None
    pick = min(left, key=lambda w: (shunned_until.get(w, 0.0) > now, waiting.get(w, 0), w))
    if not nominated:
        busy = waiting.get(pick, 0)
        why = f"the gateway nominated cluster {pick} to MultiKueue ({busy} of its workloads waiting there)"
    else:
        why = (
            f"no worker admitted it within {wait_s:g} s: the gateway nominated cluster {pick} too "
            f"(now {', '.join((*nominated, pick))})"
        )
    return Nomination((*nominated, pick), pick, why)


def recheck_after(
    workers: Sequence[str],
    nominated: Sequence[str],
    since: float,
    now: float,
    barred_until: Mapping[str, float],
    wait_s: float,
) -> float:
    """Seconds until next_nomination may add a worker to `nominated`: the end of the wait, or,
    that over, the end of the first bar of the workers left (at least a second)."""
    if now < since + wait_s:
        return since + wait_s - now
    ends = [barred_until.get(w, 0.0) for w in workers if w not in nominated]
    return max(1.0, min(ends, default=now) - now)


def wait_began(nominated_at: float, copied_at: float | None, worker_progress_at: float | None) -> float:
    """When the wait for the last worker nominated began: when MultiKueue's copy of the Workload
    appeared there (the worker has it now, and admits it or not); until then, the latest of its
    nomination and the last copy of any Workload MultiKueue made in that worker. MultiKueue's
    copies to a worker go through one 5-QPS client, so at a thousand Workloads a copy comes
    minutes after its nomination: a worker that keeps receiving copies is behind, not refusing,
    and is not passed over for it; one that receives none for the wait (lost, or its link
    down) is."""
    if copied_at is not None:
        return copied_at
    return max(nominated_at, worker_progress_at if worker_progress_at is not None else nominated_at)


def shun(nominated: Sequence[str], now: float, wait_s: float) -> dict[str, float]:
    """The workers that let a Workload wait past `wait_s`, each with when it is tried first again."""
    return dict.fromkeys(nominated, now + SHUN_FACTOR * wait_s)
