"""The smallest size (of a baseline pool, of warm headroom) whose p95 wait meets a target, on the
assumption that a larger size never does worse, in few trials.

A generator: it yields the size to try next and is sent that size's p95 wait; it returns the
smallest size in [1, hi] that meets the target, or None if hi does not. Size 0 is known not to
meet (the caller ran it). With a guess it walks from it, down if the guess meets and up if not,
in steps of 1, 2, 4, ... until the answer is bracketed (a guess d away costs about 2 log2(d) + 2
trials, one equal to the answer two); without one it tries hi first, as a bisection of [0, hi]
does. The bracket is then bisected. (Interpolating the p95 waits at the bracket's ends was tried:
a baseline pool's p95 is flat below the busy level and steep above it, and on the shared GenTD26
window that took 15 settings where bisection takes 10.)"""

from __future__ import annotations

from collections.abc import Generator


def smallest_meeting(target: float, hi: int, guess: int | None = None) -> Generator[int, float, int | None]:
    bracket: tuple[int, int] | None  # (largest size known not to meet, smallest known to meet)
    if guess is None:
        bracket = (0, hi) if (yield hi) <= target else None
    else:
        bracket = yield from _walk(target, hi, min(max(guess, 1), hi))
    if bracket is None:
        return None
    lo, top = bracket
    while top - lo > 1:
        mid = (lo + top) // 2
        if (yield mid) <= target:
            top = mid
        else:
            lo = mid
    return top


def _walk(target: float, hi: int, first: int) -> Generator[int, float, tuple[int, int] | None]:
    """From `first`, down if it meets or up if not, in steps of 1, 2, 4, ...: the bracket, or
    None if hi does not meet."""
    step = 1
    if (yield first) <= target:
        top = first
        while top - step > 0:
            below = top - step
            if (yield below) > target:
                return below, top
            top = below
            step *= 2
        return 0, top
    lo = first
    while lo < hi:
        above = min(lo + step, hi)
        if (yield above) <= target:
            return lo, above
        lo = above
        step *= 2
    return None
