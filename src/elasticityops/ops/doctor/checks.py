"""The doctor's checks: pure functions from a `ClusterSnapshot` to findings, run in order.

Each finding is pass / warn / fail / info with a one-line explanation and the fix. A check that
could not read its data says so (warn) rather than passing silently.
"""

from __future__ import annotations

from collections.abc import Callable

from elasticityops.ops.doctor.check_access import (
    REQUIRED_ACCESS,
    check_api,
    check_permissions,
    required_access,
)
from elasticityops.ops.doctor.check_kueue import check_kueue
from elasticityops.ops.doctor.check_leader import check_leader
from elasticityops.ops.doctor.check_metrics import CUSTOM_METRICS_SERVICE, check_custom_metrics, check_hpas
from elasticityops.ops.doctor.check_nodes import (
    check_device_plugin,
    check_device_plugin_logs,
    check_gpu_allocatable,
    check_gpu_nodes,
)
from elasticityops.ops.doctor.check_scheduling import (
    check_autoscaler_status,
    check_pending,
    check_priority_classes,
    check_quota,
)
from elasticityops.ops.doctor.findings import Finding, Status
from elasticityops.ops.doctor.pending import classify_pending
from elasticityops.ops.doctor.snapshot import ClusterSnapshot

__all__ = [
    "CHECKS",
    "CUSTOM_METRICS_SERVICE",
    "REQUIRED_ACCESS",
    "Finding",
    "Status",
    "classify_pending",
    "exit_code",
    "required_access",
    "run_checks",
]

CHECKS: tuple[Callable[[ClusterSnapshot], list[Finding]], ...] = (
    check_permissions,
    check_gpu_nodes,
    check_gpu_allocatable,
    check_device_plugin,
    check_device_plugin_logs,
    check_custom_metrics,
    check_hpas,
    check_priority_classes,
    check_pending,
    check_autoscaler_status,
    check_quota,
    check_leader,
    check_kueue,
)


def run_checks(s: ClusterSnapshot) -> list[Finding]:
    findings = check_api(s)
    if not s.api_reachable:
        return findings + check_quota(s)
    for check in CHECKS:
        findings.extend(check(s))
    return findings


def exit_code(findings: list[Finding]) -> int:
    return 1 if any(f.status is Status.fail for f in findings) else 0
