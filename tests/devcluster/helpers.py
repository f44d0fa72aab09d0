"""Small polling helpers for the cluster tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2, what: str = "") -> T:
    """Poll `fn` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or fn} (last: {last!r})")


def job_pods(api: Any, ns: str, job: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]]
    pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": f"job-name={job}"})
    return pods


def phase_of(api: Any, ns: str, job: str) -> str | None:
    pods = job_pods(api, ns, job)
    return pods[0]["status"].get("phase") if pods else None


def job_condition(api: Any, ns: str, job: str) -> str | None:
    """ "Complete" or "Failed" once the Job controller has decided, else None."""
    obj = api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
    for cond in obj.get("status", {}).get("conditions", []) or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None
