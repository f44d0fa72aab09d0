"""The worker clusters of a MultiKueue manager, as `--kube-workers NAME=KUBECONFIG,...` names
them (parsed purely; `unreadable` checks the files at start-up). MultiKueue runs each Job in a
worker, where its pod, its logs and the Secret its pod mounts must be; the manager only mirrors
the Job's status."""

from __future__ import annotations

import re
from collections.abc import Mapping

from elasticityops.domain.errors import FieldProblem

FLAG = "--kube-workers / EOPS_KUBE_WORKERS"
# A MultiKueueCluster is a cluster-scoped object: its name is a DNS subdomain.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def parse_workers(
    text: str | None,
    flag: str = FLAG,
    value: str = "KUBECONFIG",
    example: str = "/etc/eops/worker-1.kubeconfig",
) -> tuple[dict[str, str], list[FieldProblem]]:
    """`NAME=KUBECONFIG,...` as {name: kubeconfig path}, and what is wrong with it (named `flag`);
    `value` and `example` say what stands after each `=` (a Secret, for `eops render deploy`)."""
    if text is None or not text.strip():
        return {}, []
    workers: dict[str, str] = {}
    problems: list[FieldProblem] = []
    for item in (part.strip() for part in text.split(",")):
        name, eq, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not eq or not name or not path:
            problems.append(FieldProblem(flag, f"{item!r} is not NAME={value}", f"e.g. worker-1={example}"))
        elif not _NAME.fullmatch(name):
            problems.append(
                FieldProblem(
                    flag,
                    f"{name!r} is not a MultiKueueCluster name",
                    "use the worker's MultiKueueCluster name: lower-case letters, digits, '-' and '.'",
                )
            )
        elif name in workers:
            problems.append(FieldProblem(flag, f"{name} is named twice", "name each worker once"))
        else:
            workers[name] = path
    return workers, problems


def unreadable(workers: Mapping[str, str], flag: str = FLAG) -> list[FieldProblem]:
    """The kubeconfigs that cannot be read, each named with its worker."""
    problems = []
    for name, path in workers.items():
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            problems.append(
                FieldProblem(
                    flag,
                    f"the kubeconfig of {name}, {path}, cannot be read ({exc.strerror or exc})",
                    "give the path of a readable kubeconfig of that worker cluster",
                )
            )
    return problems
