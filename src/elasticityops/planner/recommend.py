"""Search settings for the cheapest one that meets a p95 time-to-start target.

Families searched for each scale-down window: a static baseline pool of B nodes, warm headroom
of K placeholders, and predictive headroom at the target. For B and K the search finds the
smallest size that meets the target on the assumption that p95 wait falls as capacity grows (it
does in this model up to sampling noise): it brackets the answer, then bisects the bracket
(planner/size_search.py). In the first window B is bracketed by 0 (`none`) and the largest
size, K by a walk up from 1 in doubling steps (warm answers are small); the later windows walk
from the first window's answers, which a longer scale-down window moves by a few nodes, so they
take a few settings each. Then, as cost is not monotone in the size, each search goes on above
its answer while a cheaper setting turns up (CHEAPER_PATIENCE). `none` (B = K = 0) is run once
per window for both families.

Settings run in parallel processes (one per core by default), the independent ones together:
every window's `none` and predictive, then the first window's two searches side by side, then
the other windows' searches. Every setting evaluated is kept, and the frontier is the set no
other setting beats on both cost and p95 wait. The quota to request is the chosen setting's
peak nodes plus a margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from elasticityops.planner.parallel_runs import Setting, SettingRunner
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.size_search import smallest_meeting
from elasticityops.planner.summary import Summary
from elasticityops.planner.synthetic import concurrency_profile
from elasticityops.planner.trace import Trace

Progress = Callable[[int, int, str], None]
"""(settings simulated so far, at most this many in all, the setting simulated now)."""


@dataclass(frozen=True)
class Candidate:
    family: str  # "baseline", "warm" or "predictive"
    size: int  # B or K (0 for predictive)
    scale_down_after_s: float
    summary: Summary

    @property
    def label(self) -> str:
        return self.summary.policy


@dataclass(frozen=True)
class Recommendation:
    target_p95_s: float
    best: Candidate | None  # cheapest meeting the target; None if no setting meets it
    closest: Candidate  # lowest p95 found (what to look at when the target is out of reach)
    frontier: tuple[Candidate, ...]  # by rising p95
    evaluated: tuple[Candidate, ...]
    quota_gpus: int  # GPUs to request: peak nodes of `best` (or `closest`) plus the margin
    node_pools: int  # auto-provisioned pools (pool-zones) that quota needs at 1,000 nodes each
    margin: float


def frontier(cands: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """Settings not beaten on both cost and p95 by another, sorted by p95."""
    out: list[Candidate] = []
    best_cost = math.inf
    for c in sorted(cands, key=lambda c: (c.summary.time_to_start_s.p95, c.summary.cost_usd)):
        if c.summary.cost_usd < best_cost:
            out.append(c)
            best_cost = c.summary.cost_usd
    return tuple(out)


def recommend(
    trace: Trace,
    settings: ClusterSettings,
    target_p95_s: float,
    *,
    windows: Sequence[float] = (300.0, 600.0, 1200.0),
    margin: float = 0.2,
    progress: Progress | None = None,
    workers: int = 0,
) -> Recommendation:
    """workers: simulations at once (0: one per CPU core this process may use)."""
    _, conc = concurrency_profile(trace)
    hi = max(1, min(int(conc.max()) if len(conc) else 1, settings.autoscaled_cap))
    # Per window: none, predictive, and per family at most two walks and a bisection over [0, hi].
    steps = 2 + 2 * (3 * math.ceil(math.log2(hi + 1)) + 1)
    total = steps * len(windows)
    evaluated: list[Candidate] = []
    found: dict[Setting, Candidate] = {}
    # every run bills a baseline node from 0 to at least the last request's end
    pool_cost_per_node = settings.node_price_per_hour * _last_end_s(trace) / 3600.0

    with SettingRunner(trace, settings, target_p95_s, workers) as runner:

        def run(wanted: Sequence[Setting]) -> list[Candidate]:
            """Simulate the settings not run yet, in parallel; their candidates in order."""
            new = list(dict.fromkeys(w for w in wanted if w not in found))
            for k, setting in enumerate(new):
                if progress:
                    progress(len(evaluated) + k, total, setting.label(settings, target_p95_s))
            for setting, summary in zip(new, runner.summaries(new), strict=True):
                cand = Candidate(setting.family, setting.size, setting.window, summary)
                found[setting] = cand
                evaluated.append(cand)
            return [found[w] for w in wanted]

        def meets(c: Candidate) -> bool:
            return c.summary.time_to_start_s.p95 <= target_p95_s

        firsts = run(
            [Setting("baseline", 0, w) for w in windows] + [Setting("predictive", 0, w) for w in windows]
        )
        # the first window: B by bisection of [0, hi], K up from 1 (warm answers are small: a
        # few warm nodes cover most arrivals); the other windows from its answers
        guesses: dict[str, int | None] = {"baseline": None, "warm": 1}
        for group in ([windows[0]], windows[1:]):
            searches = {
                (family, w): family_search(
                    family,
                    smallest_meeting(target_p95_s, hi, guesses[family]),
                    target_p95_s,
                    hi,
                    pool_cost_per_node,
                )
                for w in group
                if not meets(firsts[windows.index(w)])
                for family in ("baseline", "warm")
            }
            answers = _drive(searches, run)
            for family in ("baseline", "warm"):
                answer = answers.get((family, windows[0]))
                if answer is not None:
                    guesses[family] = answer
    ok = [c for c in evaluated if c.summary.time_to_start_s.p95 <= target_p95_s]
    best = min(ok, key=lambda c: c.summary.cost_usd) if ok else None
    closest = min(evaluated, key=lambda c: (c.summary.time_to_start_s.p95, c.summary.cost_usd))
    chosen = best or closest
    quota = math.ceil(chosen.summary.peak_nodes * (1.0 + margin))
    return Recommendation(
        target_p95_s=target_p95_s,
        best=best,
        closest=closest,
        frontier=frontier(evaluated),
        evaluated=tuple(evaluated),
        quota_gpus=quota,
        node_pools=max(
            1,
            math.ceil(
                (quota - (chosen.size if chosen.family == "baseline" else 0)) / settings.pool_size_limit
            ),
        ),
        margin=margin,
    )


Search = Generator[int, Candidate, "int | None"]
# Sizes above the smallest that meets, tried in a row without a cheaper one, before a search
# stops: cost is not monotone in the size (a few warm nodes more can cost less: fewer requests
# start a node that then idles out its scale-down window; on the shared GenTD26 window warm:3
# costs $3,266 and warm:1 $3,275), and what trying every size finds is the cheapest.
CHEAPER_PATIENCE = 3


def family_search(
    family: str,
    search: Generator[int, float, int | None],
    target: float,
    hi: int,
    pool_cost_per_node: float,
) -> Search:
    """The smallest size that meets (fed the p95 of each setting), then the sizes above it while
    one of the last CHEAPER_PATIENCE was cheaper, or, for a baseline pool, until the pool's own
    nodes cost more than the cheapest found. Returns the smallest meeting size."""
    tried: dict[int, Candidate] = {}
    size = next(search)
    while True:
        tried[size] = yield size
        try:
            size = search.send(tried[size].summary.time_to_start_s.p95)
        except StopIteration as done:
            answer: int | None = done.value
            break
    if answer is None:
        return None
    best = tried[answer].summary.cost_usd
    misses = 0
    size = answer
    while misses < CHEAPER_PATIENCE and size < hi:
        size += 1
        if family == "baseline" and size * pool_cost_per_node >= best:
            break
        cand = tried.get(size) or (yield size)
        if cand.summary.time_to_start_s.p95 <= target and cand.summary.cost_usd < best:
            best, misses = cand.summary.cost_usd, 0
        else:
            misses += 1
    return answer


def _last_end_s(trace: Trace) -> float:
    return float((trace.arrival_s + trace.duration_s).max()) if len(trace) else 0.0


def _drive(
    searches: dict[tuple[str, float], Search], run: Callable[[Sequence[Setting]], list[Candidate]]
) -> dict[tuple[str, float], int | None]:
    """Run the size searches side by side: each round simulates the size every unfinished search
    asks for next, together. Returns each search's smallest meeting size (None: none meets)."""
    answers: dict[tuple[str, float], int | None] = {}
    asked: dict[tuple[str, float], int] = {}
    for key, search in searches.items():
        asked[key] = next(search)  # a search always tries at least one size
    while asked:
        keys = list(asked)
        results = run([Setting(family, asked[(family, w)], w) for family, w in keys])
        for key, cand in zip(keys, results, strict=True):
            try:
                asked[key] = searches[key].send(cand)
            except StopIteration as done:
                del asked[key]
                answers[key] = done.value
    return answers
