"""The Lease decisions, a case per rule of client-go's tryAcquireOrRenew, release and the renew
deadline, on plain records and this replica's monotonic seconds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.lease import (
    Create,
    LeaseRecord,
    Observed,
    Step,
    Wait,
    Write,
    decide,
    expired,
    lost_to_another,
    may_renew_blindly,
    observe,
    released,
    renewal_overdue,
)

ME = "gw-a"
OTHER = "gw-b"
AT = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def held(holder: str, *, duration: int = 15, transitions: int = 3, renewed: datetime = AT) -> LeaseRecord:
    return LeaseRecord(holder, duration, AT - timedelta(minutes=5), renewed, transitions, "41")


@dataclass(frozen=True)
class Case:
    observed: Observed | None
    now: float
    expect: Step


CASES = {
    "no lease: create it, held by us, no transitions": Case(
        None, 100.0, Create(LeaseRecord(ME, 15, AT, AT, 0))
    ),
    "held by another, changed 5 s ago: wait": Case(Observed(held(OTHER), 95.0), 100.0, Wait(OTHER)),
    "held by another, changed 14.9 s ago: still wait": Case(Observed(held(OTHER), 85.1), 100.0, Wait(OTHER)),
    "held by another, unchanged for the lease duration here: take over, one more transition": Case(
        Observed(held(OTHER), 85.0),
        100.0,
        Write(LeaseRecord(ME, 15, AT, AT, 4, "41"), takeover=True),
    ),
    "the record's own duration counts, not ours: a 60 s lease unchanged for 20 s is fresh": Case(
        Observed(held(OTHER, duration=60), 80.0), 100.0, Wait(OTHER)
    ),
    # renewTime says an hour ago (the other's clock is behind ours): it is never compared with ours.
    "skewed renewTime in the record does not matter: changed 1 s ago here, fresh": Case(
        Observed(held(OTHER, renewed=AT - timedelta(hours=1)), 99.0), 100.0, Wait(OTHER)
    ),
    # renewTime an hour ahead (the other's clock runs ahead): expired all the same once unchanged.
    "skewed renewTime ahead does not keep a silent holder alive": Case(
        Observed(held(OTHER, renewed=AT + timedelta(hours=1)), 80.0),
        100.0,
        Write(LeaseRecord(ME, 15, AT, AT, 4, "41"), takeover=True),
    ),
    "our own lease: renew, keeping its acquire time and transitions": Case(
        Observed(held(ME), 99.0),
        100.0,
        Write(replace(held(ME), renew_time=AT), takeover=False),
    ),
    "our own lease, expired here (we were away): renew it still, no transition": Case(
        Observed(held(ME), 10.0),
        100.0,
        Write(replace(held(ME), renew_time=AT), takeover=False),
    ),
    "released (no holder): take it at once, one more transition": Case(
        Observed(released(held(OTHER), AT), 99.9),
        100.0,
        Write(LeaseRecord(ME, 15, AT, AT, 4, "41"), takeover=True),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_decide(case: Case) -> None:
    assert decide(case.observed, ME, 15, case.now, AT) == case.expect


def test_a_change_is_what_moves_the_observed_time_never_a_reread() -> None:
    first = observe(None, held(OTHER), 10.0)
    same_again = observe(first, replace(held(OTHER), resource_version="42"), 20.0)
    assert same_again.changed_at == 10.0
    assert same_again.record.resource_version == "42", "the newest resourceVersion is kept for a write"
    renewed = observe(same_again, held(OTHER, renewed=AT + timedelta(seconds=2)), 24.0)
    assert renewed.changed_at == 24.0
    assert not expired(renewed, 38.9)
    assert expired(renewed, 39.0)


@pytest.mark.parametrize(
    ("renewed_at", "now", "overdue"),
    [(90.0, 99.9, False), (90.0, 100.0, True), (50.0, 100.0, True), (100.0, 100.0, False)],
    ids=["9.9 s: within the deadline", "10 s: deadline passed", "long past", "just renewed"],
)
def test_renew_deadline(renewed_at: float, now: float, overdue: bool) -> None:
    assert renewal_overdue(renewed_at, now, 10.0) is overdue


def test_release_gives_up_the_holder_with_a_one_second_lease_keeping_transitions() -> None:
    later = AT + timedelta(seconds=30)
    assert released(held(ME), later) == LeaseRecord("", 1, later, later, 3, "41")


def test_a_leader_renews_blindly_only_its_own_unexpired_lease() -> None:
    assert may_renew_blindly(Observed(held(ME), 90.0), ME, 100.0)
    assert not may_renew_blindly(Observed(held(ME), 80.0), ME, 100.0)
    assert not may_renew_blindly(Observed(held(OTHER), 99.0), ME, 100.0)
    assert not may_renew_blindly(None, ME, 100.0)


def test_lost_to_another_names_a_live_other_holder_only() -> None:
    assert lost_to_another(Observed(held(OTHER), 95.0), ME, 100.0) == OTHER
    assert lost_to_another(Observed(held(OTHER), 80.0), ME, 100.0) is None
    assert lost_to_another(Observed(held(ME), 95.0), ME, 100.0) is None
    assert lost_to_another(Observed(released(held(OTHER), AT), 99.0), ME, 100.0) is None
