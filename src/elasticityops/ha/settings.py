"""The leader election's knobs (`eops serve --leader-elect`, EOPS_LEADER_*, EOPS_LEASE_*) and the
checks of their combination. The timings are client-go's defaults and obey its rules
(tools/leaderelection: leaseDuration > renewDeadline > JitterFactor x retryPeriod)."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from elasticityops.domain.errors import FieldProblem
from elasticityops.knobs import knob

JITTER_FACTOR = 1.2
"""A follower waits retryPeriod x (1 + up to this) between tries (client-go's JitterFactor), so
replicas started together do not ask in lockstep."""


@dataclass(frozen=True)
class LeaderElectionSettings:
    leader_elect: bool = knob(
        False,
        env="EOPS_LEADER_ELECT",
        help="Run as one of several replicas on one PostgreSQL: every replica serves the API, only "
        "the holder of a coordination.k8s.io Lease runs the dispatcher and the headroom controller "
        "(kubernetes backend; see docs/high-availability.md).",
    )
    lease_name: str = knob(
        "elasticityops", env="EOPS_LEASE_NAME", help="Name of the Lease the replicas elect a leader on."
    )
    lease_namespace: str | None = knob(
        None,
        env="EOPS_LEASE_NAMESPACE",
        shown="the backend's --namespace",
        help="Namespace of the Lease.",
    )
    identity: str | None = knob(
        None,
        env="EOPS_LEADER_IDENTITY",
        shown="HOSTNAME-PID-RANDOM",
        help="This replica's name in the Lease's holderIdentity (a Deployment passes the pod name); "
        "unique per replica.",
    )
    lease_duration_s: int = knob(
        15,
        env="EOPS_LEASE_DURATION",
        unit="seconds",
        ge=1,
        le=3600,
        help="How long a follower waits, on its own clock, after it last saw the Lease change before "
        "it takes the lead.",
    )
    renew_deadline_s: float = knob(
        10.0,
        env="EOPS_LEASE_RENEW_DEADLINE",
        unit="seconds",
        gt=0,
        le=3600,
        help="The leader stops leading (dispatcher and headroom controller stopped) when it could not "
        "renew the Lease for this long; shorter than the lease duration.",
    )
    retry_period_s: float = knob(
        2.0,
        env="EOPS_LEASE_RETRY_PERIOD",
        unit="seconds",
        gt=0,
        le=3600,
        help="How often the leader renews the Lease and a follower looks at it.",
    )


def _named(flag: str, env: str) -> str:
    return f"{flag} / {env}"


def timing_problems(settings: LeaderElectionSettings) -> list[FieldProblem]:
    """What is wrong with the combination of the three timings (each alone is in its limits)."""
    problems = []
    if settings.renew_deadline_s >= settings.lease_duration_s:
        problems.append(
            FieldProblem(
                _named("--lease-renew-deadline", "EOPS_LEASE_RENEW_DEADLINE"),
                f"the renew deadline ({settings.renew_deadline_s:g} s) must be shorter than the lease "
                f"duration ({settings.lease_duration_s} s): a leader that cannot renew must stop "
                "before the others may take over",
                "e.g. --lease-duration 15 --lease-renew-deadline 10",
            )
        )
    if settings.renew_deadline_s <= JITTER_FACTOR * settings.retry_period_s:
        problems.append(
            FieldProblem(
                _named("--lease-retry-period", "EOPS_LEASE_RETRY_PERIOD"),
                f"the retry period ({settings.retry_period_s:g} s) times {JITTER_FACTOR:g} must be "
                f"shorter than the renew deadline ({settings.renew_deadline_s:g} s), so the leader "
                "gets more than one try to renew",
                "e.g. --lease-renew-deadline 10 --lease-retry-period 2",
            )
        )
    return problems


def default_identity() -> str:
    """HOSTNAME-PID-RANDOM: unique even for two replicas on one host, or one restarted."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
