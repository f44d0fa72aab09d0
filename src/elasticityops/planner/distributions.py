"""Delay distributions written as short specs: `fixed:120`, `lognormal:median=240,p95=420`,
`uniform:80,120`, `exponential:mean=200`. Values are seconds. Parsing is strict and its errors
name the spec; sampling takes the caller's `random.Random`, so runs are reproducible.

The project's one delay spec language: the planner's `--provision-delay` and the dev cluster's
`provision_delay` knob are both parsed here, so a spec means the same delay in both."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from elasticityops.domain.headroom.sizing import normal_ppf
from elasticityops.planner.errors import PlannerInputError

_Z95 = 1.6448536269514722  # standard normal 95th percentile


@dataclass(frozen=True)
class Distribution:
    """A non-negative delay in seconds. kind: fixed | uniform | lognormal | exponential.

    fixed: a = value. uniform: a = low, b = high. lognormal: a = mu, b = sigma of log-seconds.
    exponential: a = mean.
    """

    kind: str
    a: float
    b: float = 0.0
    spec: str = ""

    def sample(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "lognormal":
            return rng.lognormvariate(self.a, self.b)
        return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0

    def quantile(self, q: float) -> float:
        """The q-quantile in seconds (q in (0, 1)); used to size lead times."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return self.a + q * (self.b - self.a)
        if self.kind == "lognormal":
            return math.exp(self.a + self.b * normal_ppf(q))
        return -self.a * math.log(1.0 - q)

    @property
    def median(self) -> float:
        return self.quantile(0.5)

    def __str__(self) -> str:
        return self.spec or f"{self.kind}:{self.a},{self.b}"


def fixed(seconds: float) -> Distribution:
    return Distribution("fixed", float(seconds), spec=f"fixed:{seconds:g}")


def parse_distribution(spec: str, flag: str = "--provision-delay") -> Distribution:
    """Parse a spec; a bad one raises PlannerInputError naming `flag` and the spec."""
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    fail = (
        f"{flag}: cannot parse {spec!r}; expected fixed:120, uniform:80,120, "
        f"lognormal:median=240,p95=420 or exponential:mean=200"
    )
    if not sep or not rest.strip():
        raise PlannerInputError(fail)
    plain, named = _numbers(rest, fail)
    values = plain + list(named.values())
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise PlannerInputError(f"{flag}: {spec!r} has a negative or non-finite value")
    if kind == "fixed" and len(plain) == 1 and not named:
        return Distribution("fixed", plain[0], spec=text)
    if kind == "uniform" and len(plain) == 2 and not named and plain[0] <= plain[1]:
        return Distribution("uniform", plain[0], plain[1], spec=text)
    if kind == "exponential" and ((len(plain) == 1 and not named) or (not plain and set(named) == {"mean"})):
        return Distribution("exponential", plain[0] if plain else named["mean"], spec=text)
    if kind == "lognormal" and not plain and set(named) == {"median", "p95"}:
        median, p95 = named["median"], named["p95"]
        if not 0 < median <= p95:
            raise PlannerInputError(f"{flag}: {spec!r} needs 0 < median <= p95")
        return Distribution("lognormal", math.log(median), math.log(p95 / median) / _Z95, spec=text)
    raise PlannerInputError(fail)


def _numbers(rest: str, fail: str) -> tuple[list[float], dict[str, float]]:
    """The values after the colon: plain ones in order, `name=value` ones by lower-case name."""
    named: dict[str, float] = {}
    plain: list[float] = []
    try:
        for p in (p.strip() for p in rest.split(",")):
            key, eq, value = p.partition("=")
            if eq:
                named[key.strip().lower()] = float(value)
            else:
                plain.append(float(p))
    except ValueError:
        raise PlannerInputError(fail) from None
    return plain, named
