"""How a job ended, from its `exit.json`, as the event the dispatcher turns into a state. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from elasticityops.domain.invocations import FailureReason
from elasticityops.domain.ports import BackendEvent, EventKind


def stamp(record: dict[str, Any] | None, fallback: datetime) -> datetime:
    """The wall-clock time a run-dir record carries (`at`, seconds since the epoch)."""
    value = (record or {}).get("at")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    return fallback


def finished_event(
    invocation_id: str,
    record: dict[str, Any],
    *,
    at: datetime,
    node: str | None,
    result: bytes | None,
    result_problem: str = "",
) -> BackendEvent:
    code = record.get("exit_code")
    exit_code = code if isinstance(code, int) else None
    reason: FailureReason | None
    if record.get("launch_error"):
        reason, message = FailureReason.launch_error, str(record["launch_error"])
    elif record.get("lost"):
        reason, message = FailureReason.lost, str(record.get("message") or "the job's supervisor died")
    elif record.get("cancelled"):
        reason, message = FailureReason.cancelled, "cancelled"
    elif record.get("timed_out"):
        reason, message = FailureReason.timeout, "ran past timeout_seconds and was killed"
    elif exit_code == 0:
        reason, message = None, ""
    else:
        reason = FailureReason.exit_code
        sig = record.get("signal")
        message = f"killed by {sig} (exit code {exit_code})" if sig else f"exited with code {exit_code}"
    if result_problem:
        message = f"{message}; {result_problem}" if message else result_problem
    return BackendEvent(
        invocation_id=invocation_id,
        kind=EventKind.finished,
        at=at,
        exit_code=exit_code,
        reason=reason,
        message=message,
        node=node,
        timed_out=bool(record.get("timed_out")) and reason is FailureReason.timeout,
        cancelled=reason is FailureReason.cancelled,
        result=result,
    )
