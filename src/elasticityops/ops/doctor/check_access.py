"""Checks: the API server answers and the identity has the permissions ElasticityOps needs."""

from __future__ import annotations

from typing import Any

from elasticityops.backends.kubernetes.deploy import (
    BARE_POD_RULES,
    NODE_RULES,
    NOMINATE_RULES,
    ROLE_RULES,
    STALE_JOB_RULES,
)
from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.snapshot import AccessRule, ClusterSnapshot


def check_api(s: ClusterSnapshot) -> list[Finding]:
    if not s.api_reachable:
        return [
            Finding(
                "api",
                Status.fail,
                f"API server not reachable: {s.api_error}",
                "check --kubeconfig, the current context and that the API server answers (kubectl version)",
            )
        ]
    return [
        Finding(
            "api", Status.passed, f"API server reachable (Kubernetes {s.server_version or 'unknown version'})"
        )
    ]


# What ElasticityOps' gateway does with each permission, for the explanation.
def _rules_to_access(rules: list[dict[str, Any]], namespaced: bool) -> tuple[AccessRule, ...]:
    found: list[AccessRule] = []
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                found.extend(AccessRule(verb, name, group, sub, namespaced) for verb in rule["verbs"])
    return tuple(found)


KUEUE_GROUP = "kueue.x-k8s.io"
# Exactly the Role and ClusterRole that `eops render deploy` grants the gateway: one source. The
# Role's Kueue rule (reading Workloads) is needed only with --admission kueue, and reported by
# the Kueue checks (check_kueue.py), so a cluster without Kueue is not asked about it.
_GRANTED: tuple[AccessRule, ...] = (
    *_rules_to_access(ROLE_RULES, namespaced=True),
    *_rules_to_access(NODE_RULES, namespaced=False),
)
REQUIRED_ACCESS: tuple[AccessRule, ...] = tuple(r for r in _GRANTED if r.group != KUEUE_GROUP)
KUEUE_ACCESS: tuple[AccessRule, ...] = tuple(r for r in _GRANTED if r.group == KUEUE_GROUP)
BARE_POD_ACCESS: tuple[AccessRule, ...] = _rules_to_access(BARE_POD_RULES, namespaced=True)
NOMINATE_ACCESS: tuple[AccessRule, ...] = _rules_to_access(NOMINATE_RULES, namespaced=True)
# Used only on a MultiKueue manager (stale_jobs.py): reviewed with Kueue admission, reported by
# the Kueue checks where the queue dispatches through MultiKueue, never by check_permissions.
STALE_JOB_ACCESS: tuple[AccessRule, ...] = _rules_to_access(STALE_JOB_RULES, namespaced=True)
_STALE_JOB_LABELS = frozenset(r.label for r in STALE_JOB_ACCESS)  # a reviewed rule differs in `allowed`


def is_kueue_access(rule: AccessRule) -> bool:
    """Whether `rule` is one the Kueue checks report (check_kueue.py), not check_permissions."""
    return rule.group == KUEUE_GROUP or rule.label in _STALE_JOB_LABELS


def required_access(workload: str, kueue: bool = False, nominate: bool = False) -> tuple[AccessRule, ...]:
    """What the gateway needs with `workload` (job, or pod: it creates and deletes the pods too),
    with Kueue admission (`kueue`: it reads each Job's Workload) and as MultiKueue's dispatcher
    (`nominate`: it writes each Workload's nominated workers). With Kueue the right a MultiKueue
    manager needs is reviewed too: whether the queue dispatches through MultiKueue is known
    only from the Kueue objects, read beside the reviews."""
    bare = BARE_POD_ACCESS if workload == "pod" else ()
    kueue_rules = (*KUEUE_ACCESS, *(NOMINATE_ACCESS if nominate else ()), *STALE_JOB_ACCESS) if kueue else ()
    return (*REQUIRED_ACCESS, *bare, *kueue_rules)


def grant_command(missing: list[AccessRule], namespace: str) -> str:
    """kubectl commands that grant `missing`, and how to bind them."""
    namespaced = [r for r in missing if r.namespaced]
    cluster = [r for r in missing if not r.namespaced]
    parts: list[str] = []
    if namespaced:
        verbs = ",".join(sorted({r.verb for r in namespaced}))
        resources = ",".join(
            sorted(
                {
                    # kubectl's form: resource.group/subresource (deployments.apps/scale)
                    r.resource
                    + (f".{r.group}" if r.group else "")
                    + (f"/{r.subresource}" if r.subresource else "")
                    for r in namespaced
                }
            )
        )
        parts.append(f"kubectl -n {namespace} create role eops-gateway --verb={verbs} --resource={resources}")
    if cluster:
        verbs = ",".join(sorted({r.verb for r in cluster}))
        parts.append(f"kubectl create clusterrole eops-nodes --verb={verbs} --resource=nodes")
    return (
        "; ".join(parts)
        + ", then bind them to the gateway's ServiceAccount (or apply the Role from `eops render deploy`)"
    )


def check_permissions(s: ClusterSnapshot) -> list[Finding]:
    if "access" in s.unreadable:
        return [
            Finding(
                "permissions",
                Status.warn,
                f"could not review permissions: {s.unreadable['access']}",
                "allow create on selfsubjectaccessreviews.authorization.k8s.io (every authenticated user "
                "has it by default)",
            )
        ]
    access = [rule for rule in s.access if not is_kueue_access(rule)]
    missing = [rule for rule in access if not rule.allowed]
    who = f" for {s.identity}" if s.identity else ""
    if not access:
        return [
            Finding(
                "permissions",
                Status.warn,
                "no permission was reviewed",
                "run doctor against a reachable cluster",
            )
        ]
    if missing:
        # The snapshot reviewed the bare-pod rights only where the gateway creates bare pods.
        bare = {r.label for r in BARE_POD_ACCESS}
        made = "bare pod" if any(rule.label in bare for rule in access) else "Job"
        return [
            Finding(
                "permissions",
                Status.fail,
                f"ElasticityOps cannot {names([r.label for r in missing], limit=8)} in namespace "
                f"{s.namespace}{who}: it creates one {made} per request and watches its pods, events "
                "and logs",
                grant_command(missing, s.namespace),
            )
        ]
    return [
        Finding(
            "permissions",
            Status.passed,
            f"all {len(access)} permissions ElasticityOps needs are granted in {s.namespace}{who}",
        )
    ]
