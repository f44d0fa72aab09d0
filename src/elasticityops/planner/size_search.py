"""The smallest size (of a baseline pool, of warm headroom) that meets a target, on the assumption
that a larger size never does worse, in few trials when a good guess is at hand.

A generator: it yields the size to try next and is sent whether that size met the target; it
returns the smallest size in [1, hi] that meets, or None if hi does not. Size 0 is known not to
meet (the caller ran it). From the guess it walks down (if the guess meets) or up (if not) with
steps of 1, 2, 4, ... until the boundary is bracketed, then bisects the bracket: a guess d away
from the answer costs about 2 log2(d) + 2 trials, and one equal to it two."""

from __future__ import annotations

from collections.abc import Generator


def smallest_meeting(guess: int, hi: int) -> Generator[int, bool, int | None]:
    lo = 0  # the largest size known not to meet
    first = min(max(guess, 1), hi)
    if (yield first):
        top = first  # the smallest size known to meet
        step = 1
        while top - step > lo:
            below = top - step
            if not (yield below):
                lo = below
                break
            top = below
            step *= 2
    else:
        lo = first
        step = 1
        while True:
            if lo >= hi:
                return None
            above = min(lo + step, hi)
            if (yield above):
                top = above
                break
            lo = above
            step *= 2
    while top - lo > 1:
        mid = (lo + top) // 2
        if (yield mid):
            top = mid
        else:
            lo = mid
    return top
