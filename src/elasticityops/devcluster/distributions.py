"""Provisioning-delay distributions, spelled like the planner's: `fixed:120`, `uniform:a,b`,
`lognormal:median=240,p95=420`. Parsing and sampling are pure (the RNG is passed in)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# z-score of the 95th percentile of a standard normal: p95 = median * exp(Z95 * sigma).
_Z95 = 1.6448536269514722


@dataclass(frozen=True)
class Delay:
    """A distribution of seconds; `kind` is fixed, uniform or lognormal."""

    kind: str
    a: float  # fixed: value; uniform: low; lognormal: median
    b: float = 0.0  # uniform: high; lognormal: p95

    def sample(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        sigma = math.log(self.b / self.a) / _Z95
        return float(self.a * math.exp(rng.gauss(0.0, sigma)))

    def spec(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{self.a:g}"
        if self.kind == "uniform":
            return f"uniform:{self.a:g},{self.b:g}"
        return f"lognormal:median={self.a:g},p95={self.b:g}"


def parse_delay(spec: str) -> Delay:
    """Parse a delay spec; a bare number means `fixed:<number>`. Raises ValueError if malformed."""
    text = spec.strip()
    kind, _, rest = text.partition(":")
    if not rest:
        return Delay("fixed", _non_negative(float(kind)))
    kind = kind.strip().lower()
    if kind == "fixed":
        return Delay("fixed", _non_negative(float(rest)))
    if kind == "uniform":
        low_s, _, high_s = rest.partition(",")
        low, high = _non_negative(float(low_s)), _non_negative(float(high_s))
        if high < low:
            raise ValueError(f"uniform delay needs low <= high: {spec!r}")
        return Delay("uniform", low, high)
    if kind == "lognormal":
        params = dict(part.split("=", 1) for part in rest.split(","))
        median, p95 = float(params["median"]), float(params["p95"])
        if not 0 < median < p95:
            raise ValueError(f"lognormal delay needs 0 < median < p95: {spec!r}")
        return Delay("lognormal", median, p95)
    raise ValueError(f"unknown delay distribution {spec!r} (fixed:S, uniform:A,B, lognormal:median=M,p95=P)")


def _non_negative(value: float) -> float:
    if value < 0 or math.isnan(value):
        raise ValueError(f"delay must be >= 0, got {value}")
    return value
