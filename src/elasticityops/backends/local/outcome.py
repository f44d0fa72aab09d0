"""How a job ended, from its `exit.json`, as the one outcome every backend reports. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from elasticityops.domain.events import Finished
from elasticityops.domain.invocations import FailureReason, State


def stamp(record: dict[str, Any] | None, fallback: datetime) -> datetime:
    """The wall-clock time a run-dir record carries (`at`, seconds since the epoch)."""
    value = (record or {}).get("at")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    return fallback


def outcome_of(
    record: dict[str, Any], *, at: datetime, result: bytes | None, result_problem: str = ""
) -> Finished:
    """The one outcome an `exit.json` record says (its supervisor wrote it, or the gateway when
    the supervisor was lost), with what its log is missing and the result file's problem
    appended to the message. Whatever the job left as its result is kept, whichever way it
    ended."""
    outcome = _outcome(record, at)
    message = _told(_told(outcome.message, _log_problem(record)), result_problem)
    return replace(outcome, result=result, message=message)


def _log_problem(record: dict[str, Any]) -> str:
    lost = record.get("log_lost_bytes")
    if not isinstance(lost, int) or lost <= 0:
        return ""
    why = str(record.get("log_error") or "the disk refused them")
    return f"{lost} bytes of its output are missing from its log ({why}, on its run directory's disk)"


def _told(message: str, problem: str) -> str:
    if not problem:
        return message
    return f"{message}; {problem}" if message else problem


def _outcome(record: dict[str, Any], at: datetime) -> Finished:
    code = record.get("exit_code")
    exit_code = code if isinstance(code, int) else None
    if record.get("launch_error"):
        return Finished.failed(at, FailureReason.launch_error, str(record["launch_error"]))
    if record.get("lost"):
        message = str(record.get("message") or "the job's supervisor died")
        return Finished.failed(at, FailureReason.lost, message, exit_code=exit_code)
    if record.get("cancelled"):
        return Finished(State.cancelled, at, FailureReason.cancelled, exit_code, "cancelled")
    if record.get("timed_out"):
        if record.get("started") is False:
            message = (
                "timeout_seconds ran out while it waited for its GPU slot (the wait counts); "
                "the job never started"
            )
            return Finished.timed_out(at, message)
        return Finished.timed_out(at, "ran past timeout_seconds and was killed", exit_code=exit_code)
    if exit_code == 0:
        return Finished.succeeded(at)
    sig = record.get("signal")
    message = f"killed by {sig} (exit code {exit_code})" if sig else f"exited with code {exit_code}"
    return Finished.failed(at, FailureReason.exit_code, message, exit_code=exit_code)
