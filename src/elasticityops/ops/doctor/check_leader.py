"""Which gateway replica leads, as the leader election's Lease says (docs/high-availability.md).

The age is the doctor's clock less the Lease's renewTime, so it carries the skew between this
machine and the leader's; the replicas themselves never compare those clocks (domain/lease.py), so
a large age here is a hint to look, not proof that the leader died."""

from __future__ import annotations

from elasticityops.ops.doctor.findings import Finding, Status
from elasticityops.ops.doctor.snapshot import ClusterSnapshot

CHECK = "leader"


def check_leader(s: ClusterSnapshot) -> list[Finding]:
    where = f"Lease {s.lease_name} in namespace {s.namespace}"
    look = (
        f"kubectl -n {s.namespace} get pods -l app.kubernetes.io/name=elasticityops, and each "
        "replica's /readyz (it names its role and the leader)"
    )
    if "lease" in s.unreadable:
        return [
            Finding(
                CHECK,
                Status.warn,
                f"cannot read the {where}: {s.unreadable['lease']}",
                "grant get on leases.coordination.k8s.io to this identity to see the leader",
            )
        ]
    lease = s.lease
    if lease is None:
        return [
            Finding(
                CHECK,
                Status.info,
                f"no {where}: the gateway runs without --leader-elect (a single gateway leads by itself)",
                "for replicas: eops render deploy --replicas 3 --database-url-secret NAME",
            )
        ]
    history = f"{lease.transitions} transition{'s' if lease.transitions != 1 else ''}"
    if not lease.holder:
        return [
            Finding(
                CHECK,
                Status.warn,
                f"the {where} is released: no replica leads now ({history}); a running follower "
                "takes it at its next look (a few seconds)",
                f"if it stays released, no replica is running: {look}",
            )
        ]
    if lease.renewed_ago_s is None:
        return [
            Finding(
                CHECK, Status.info, f"replica {lease.holder} holds the {where} (never renewed; {history})"
            )
        ]
    ago = f"{lease.renewed_ago_s:.0f} s ago"
    if lease.renewed_ago_s > lease.duration_s:
        return [
            Finding(
                CHECK,
                Status.warn,
                f"replica {lease.holder} holds the {where} but last renewed it {ago}, longer than "
                f"the lease ({lease.duration_s} s; {history}): it may have died, and a follower "
                "takes over within one lease duration of seeing no change",
                f"check the replicas: {look}; the age is this machine's clock against the "
                "leader's, so clock skew adds to it",
            )
        ]
    return [
        Finding(
            CHECK,
            Status.passed,
            f"replica {lease.holder} leads: renewed {ago}, lease {lease.duration_s} s, {history} ({where})",
        )
    ]
