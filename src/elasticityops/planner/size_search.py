"""The smallest size (of a baseline pool, of warm headroom) whose p95 wait meets a target, on the
assumption that a larger size never does worse, in few trials.

A generator: it yields the size to try next and is sent that size's p95 wait; it returns the
smallest size in [1, hi] that meets the target, or None if hi does not. Size 0 is known not to
meet (the caller ran it and passes its p95). With a guess it walks from it, down if the guess
meets and up if not, in steps of 1, 2, 4, ... until the answer is bracketed (a guess d away
costs about 2 log2(d) + 2 trials, one equal to the answer two); without one it tries hi first.
The bracket is then narrowed by interpolating the p95 waits at its ends to the target (the
p95 falls smoothly with a pool's size), with a plain halving whenever a step did not halve the
bracket, so it never takes more than twice bisection's trials."""

from __future__ import annotations

from collections.abc import Generator

Bracket = tuple[int, float, int, float]
"""(largest size known not to meet, its p95, smallest size known to meet, its p95)"""


def smallest_meeting(
    target: float, hi: int, at_zero: float, guess: int | None = None
) -> Generator[int, float, int | None]:
    bracket: Bracket | None
    if guess is None:
        top_p95 = yield hi
        bracket = (0, at_zero, hi, top_p95) if top_p95 <= target else None
    else:
        bracket = yield from _walk(target, hi, at_zero, min(max(guess, 1), hi))
    if bracket is None:
        return None
    return (yield from _narrow(target, bracket))


def _walk(target: float, hi: int, at_zero: float, first: int) -> Generator[int, float, Bracket | None]:
    """From `first`, down if it meets or up if not, in steps of 1, 2, 4, ...: the bracket, or
    None if hi does not meet."""
    p95 = yield first
    step = 1
    if p95 <= target:
        lo, lo_p95, top, top_p95 = 0, at_zero, first, p95
        while top - step > lo:
            below = top - step
            p95 = yield below
            if p95 > target:
                return below, p95, top, top_p95
            top, top_p95 = below, p95
            step *= 2
        return lo, lo_p95, top, top_p95
    lo, lo_p95 = first, p95
    while lo < hi:
        above = min(lo + step, hi)
        p95 = yield above
        if p95 <= target:
            return lo, lo_p95, above, p95
        lo, lo_p95 = above, p95
        step *= 2
    return None


def _narrow(target: float, bracket: Bracket) -> Generator[int, float, int]:
    """Narrow the bracket to neighbours; the smallest size that meets."""
    lo, lo_p95, top, top_p95 = bracket
    interpolate = True
    while top - lo > 1:
        width = top - lo
        if interpolate and lo_p95 > top_p95:
            share = (lo_p95 - target) / (lo_p95 - top_p95)
            mid = min(max(lo + round(share * width), lo + 1), top - 1)
        else:
            mid = (lo + top) // 2
        p95 = yield mid
        if p95 <= target:
            top, top_p95 = mid, p95
        else:
            lo, lo_p95 = mid, p95
        interpolate = 2 * (top - lo) <= width
    return top
