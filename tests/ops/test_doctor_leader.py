"""`eops doctor`'s leader line: what the leader election's Lease says, over hand-built snapshots
(the gatherer's read of a real Lease is in tests/ha/test_lease_cluster.py)."""

from __future__ import annotations

import pytest

from elasticityops.ops.doctor.check_leader import check_leader
from elasticityops.ops.doctor.findings import Status
from elasticityops.ops.doctor.snapshot import ClusterSnapshot, LeaseInfo


def snap(lease: LeaseInfo | None, unreadable: dict[str, str] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(api_reachable=True, namespace="eops", lease=lease, unreadable=unreadable or {})


@pytest.mark.parametrize(
    ("lease", "unreadable", "status", "says"),
    [
        pytest.param(None, None, Status.info, "without --leader-elect", id="no-lease"),
        pytest.param(
            LeaseInfo("gw-0", 15, 3.2, 2),
            None,
            Status.passed,
            "replica gw-0 leads: renewed 3 s ago",
            id="fresh",
        ),
        pytest.param(
            LeaseInfo("gw-0", 15, 42.0, 1), None, Status.warn, "last renewed it 42 s ago", id="stale"
        ),
        pytest.param(LeaseInfo("", 1, 5.0, 4), None, Status.warn, "is released", id="released"),
        pytest.param(LeaseInfo("gw-1", 15, None, 0), None, Status.info, "never renewed", id="never-renewed"),
        pytest.param(None, {"lease": "403 forbidden"}, Status.warn, "cannot read", id="forbidden"),
    ],
)
def test_the_lease_is_explained(
    lease: LeaseInfo | None, unreadable: dict[str, str] | None, status: Status, says: str
) -> None:
    [finding] = check_leader(snap(lease, unreadable))
    assert finding.status is status
    assert says in finding.message
    assert "Lease elasticityops in namespace eops" in finding.message
    if status is Status.warn:
        assert finding.fix


def test_transitions_are_counted_in_words() -> None:
    [one] = check_leader(snap(LeaseInfo("gw-0", 15, 1.0, 1)))
    assert "1 transition " in one.message
    assert "1 transitions" not in one.message
