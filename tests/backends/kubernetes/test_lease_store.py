"""The Lease as an API object and back (pure): MicroTime as Kubernetes writes it, defaults for a
Lease made by hand, the resourceVersion carried for optimistic writes. On the real API server:
test_lease_cluster.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from elasticityops.backends.kubernetes.lease_store import lease_object, micro_time, record_of
from elasticityops.domain.lease import LeaseRecord

AT = datetime(2026, 12, 2, 1, 2, 3, 45, tzinfo=UTC)


def test_micro_time_is_rfc3339_utc_with_microseconds() -> None:
    assert micro_time(AT) == "2026-12-02T01:02:03.000045Z"
    east = AT.astimezone(timezone(timedelta(hours=9)))
    assert micro_time(east) == "2026-12-02T01:02:03.000045Z", "written in UTC whatever the zone"
    assert micro_time(None) is None


def test_a_record_round_trips_through_its_lease() -> None:
    record = LeaseRecord("gw-a", 15, AT - timedelta(minutes=1), AT, 3, "812")
    lease = lease_object("elasticityops", "ns", record)
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    assert lease["kind"] == "Lease"
    assert lease["metadata"]["resourceVersion"] == "812"
    assert lease["spec"] == {
        "holderIdentity": "gw-a",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 3,
        "acquireTime": "2026-12-02T01:01:03.000045Z",
        "renewTime": "2026-12-02T01:02:03.000045Z",
    }
    assert record_of(lease) == record


def test_a_released_lease_has_an_empty_holder_and_a_new_one_no_resource_version() -> None:
    lease = lease_object("l", "ns", LeaseRecord("", 1, AT, AT, 3))
    assert lease["spec"]["holderIdentity"] == ""
    assert "resourceVersion" not in lease["metadata"]


def test_a_lease_made_by_hand_reads_with_kubernetes_defaults() -> None:
    bare = {"metadata": {"name": "l", "resourceVersion": "5"}, "spec": {"holderIdentity": "x"}}
    assert record_of(bare) == LeaseRecord("x", 0, None, None, 0, "5")
    assert record_of({"metadata": {}}) == LeaseRecord("", 0, None, None, 0, "")
