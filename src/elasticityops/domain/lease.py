"""Leader election decisions, pure: from the Lease record as read, the moment this replica last
saw it change (on its own monotonic clock) and the settings, what to do next.

These are client-go's semantics (tools/leaderelection/leaderelection.go, tryAcquireOrRenew):
- The times inside the record are written (renewTime as Kubernetes does) but never compared with
  this replica's clock: another machine wrote them. A record is expired when it has not CHANGED
  for its leaseDurationSeconds as measured here since this replica saw it change, so clock skew
  between replicas does not matter (a skew in their clock RATES does; the renew deadline being
  shorter than the lease duration is the margin for it).
- A record with no holder (released) may be taken at once; one held by another and not expired
  is left alone; one held by this identity is renewed, keeping its acquire time and transitions;
  anything else is taken over, counting one more transition.
- The leader stops leading when it could not renew within the renew deadline.
- Release (a graceful stop) writes no holder and a lease of 1 s, so a follower takes over at
  its next look instead of after a whole lease duration (client-go's ReleaseOnCancel)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease says (its spec), and the resourceVersion it was read or written at."""

    holder: str
    """holderIdentity; empty: nobody holds it (released)."""
    lease_duration_s: int
    """leaseDurationSeconds: how long the others wait, on their own clocks, after a change."""
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    """leaseTransitions: how many times the lease passed to another holder."""
    resource_version: str = ""

    def same_as(self, other: LeaseRecord) -> bool:
        """Whether `other` says the same (the resourceVersion aside): only a change shows that
        the holder is alive."""
        return replace(self, resource_version="") == replace(other, resource_version="")


@dataclass(frozen=True)
class Observed:
    """The record as this replica knows it, and when (monotonic seconds) it saw it change."""

    record: LeaseRecord
    changed_at: float


def observe(previous: Observed | None, record: LeaseRecord, now: float) -> Observed:
    """`record` as read at `now`: the change time moves only when the record says something new."""
    if previous is not None and previous.record.same_as(record):
        return Observed(record, previous.changed_at)  # the newest resourceVersion, the old time
    return Observed(record, now)


def expired(observed: Observed, now: float) -> bool:
    """Whether the record has not changed for its lease duration, on this replica's clock."""
    return now >= observed.changed_at + observed.record.lease_duration_s


def age(observed: Observed, now: float) -> float:
    """Seconds since this replica saw the record change."""
    return max(0.0, now - observed.changed_at)


@dataclass(frozen=True)
class Create:
    """No Lease exists: create it, held by us."""

    record: LeaseRecord


@dataclass(frozen=True)
class Write:
    """Update the Lease (at the observed resourceVersion) to `record`: a renewal when we held it
    (`takeover` False), else an acquisition."""

    record: LeaseRecord
    takeover: bool


@dataclass(frozen=True)
class Wait:
    """Another holds a lease that has not expired: leave it (and stop leading, if we were)."""

    holder: str


Step = Create | Write | Wait


def decide(observed: Observed | None, identity: str, lease_duration_s: int, now: float, at: datetime) -> Step:
    """What to do with the Lease as observed (None: there is none), at monotonic `now` and wall
    time `at` (what renewTime/acquireTime say; only for people and other tools to read)."""
    if observed is None:
        return Create(LeaseRecord(identity, lease_duration_s, at, at, 0))
    record = observed.record
    if record.holder and record.holder != identity and not expired(observed, now):
        return Wait(record.holder)
    if record.holder == identity:
        renewed = replace(record, lease_duration_s=lease_duration_s, renew_time=at)
        return Write(renewed, takeover=False)
    taken = LeaseRecord(identity, lease_duration_s, at, at, record.transitions + 1, record.resource_version)
    return Write(taken, takeover=True)


def may_renew_blindly(observed: Observed | None, identity: str, now: float) -> bool:
    """client-go's fast path: a leader whose own record has not expired writes its renewal at
    the resourceVersion it last wrote, without reading first (a 409 sends it the long way)."""
    return observed is not None and observed.record.holder == identity and not expired(observed, now)


def renewal_overdue(renewed_at: float, now: float, renew_deadline_s: float) -> bool:
    """Whether a leader that last renewed (started its successful try) at `renewed_at` has gone
    the renew deadline without renewing, and must stop leading."""
    return now - renewed_at >= renew_deadline_s


def lost_to_another(observed: Observed | None, identity: str, now: float) -> str | None:
    """The identity now holding a live lease that is not ours, or None."""
    if observed is None:
        return None
    holder = observed.record.holder
    return holder if holder and holder != identity and not expired(observed, now) else None


def released(record: LeaseRecord, at: datetime) -> LeaseRecord:
    """`record` given up: no holder, a 1 s lease, the transitions kept (client-go's release)."""
    return LeaseRecord("", 1, at, at, record.transitions, record.resource_version)
