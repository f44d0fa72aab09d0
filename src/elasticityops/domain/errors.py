"""The project's own error tree. Lower libraries' exceptions are translated into these at the
edges (store, backends, HTTP client) and mapped to HTTP answers in one place (api/errors.py).

Retry meaning lives in the type: `TemporaryError` may be retried after `retry_after` seconds,
everything else is permanent."""

from __future__ import annotations

from dataclasses import dataclass, field


class EopsError(Exception):
    """Base of every error ElasticityOps raises on purpose."""

    status_code = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with an input: where (a dotted path such as `gpu.count`), what, and the fix."""

    field: str
    problem: str
    fix: str = ""

    def render(self) -> str:
        text = f"{self.field}: {self.problem}"
        return f"{text}; {self.fix}" if self.fix else text


@dataclass
class InvalidInput(EopsError):
    """The caller sent something we cannot accept; every problem names its field and the fix."""

    problems: list[FieldProblem] = field(default_factory=list)
    status_code = 422
    code = "invalid_input"

    def __post_init__(self) -> None:
        super().__init__("; ".join(p.render() for p in self.problems) or "invalid input")

    def __str__(self) -> str:
        return self.message


class NotFound(EopsError):
    status_code = 404
    code = "not_found"


class Conflict(EopsError):
    status_code = 409
    code = "conflict"


class Unauthorized(EopsError):
    status_code = 401
    code = "unauthorized"


class Forbidden(EopsError):
    """A valid token whose scope does not cover the request."""

    status_code = 403
    code = "forbidden"


class PayloadTooLarge(EopsError):
    status_code = 413
    code = "payload_too_large"


class InvalidTransition(EopsError):
    """A state change that the invocation lifecycle does not allow (a bug or a lost race)."""

    status_code = 409
    code = "invalid_transition"


class TemporaryError(EopsError):
    """Something outside failed in a way worth retrying (429, 5xx, dropped connection)."""

    status_code = 503
    code = "temporarily_unavailable"

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(EopsError):
    """Something outside refused in a way that retrying will not fix."""

    status_code = 502
    code = "upstream_refused"
