"""The client's own error tree: httpx exceptions and the server's error bodies become these."""

from __future__ import annotations

from elasticityops.wire import InvocationOut, ProblemOut

URL_ENV = "EOPS_URL"


class ClientError(Exception):
    """Base of every error this client raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConnectionFailed(ClientError):
    """No answer from the gateway: refused, unreachable, timed out or cut off."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(
            f"cannot reach the ElasticityOps gateway at {url} ({detail}); start it with "
            f"`eops serve`, or point {URL_ENV} at a running one"
        )
        self.url = url
        self.detail = detail


class InvalidSpec(ClientError):
    """A function spec that fails validation here, before any request is sent."""

    def __init__(self, problems: list[ProblemOut]) -> None:
        super().__init__("; ".join(render_problem(p) for p in problems) or "invalid function spec")
        self.problems = problems


class InvalidArgument(ClientError):
    """An argument or setting the client cannot send (a URL that does not parse, a token or
    key with a newline), found before any request is made: bad input, not a network error."""

    def __init__(self, problems: list[ProblemOut]) -> None:
        super().__init__("; ".join(render_problem(p) for p in problems) or "invalid argument")
        self.problems = problems


class ApiError(ClientError):
    """The gateway answered with an error (its `ErrorOut` body, or what we could make of it)."""

    def __init__(self, status: int, code: str, message: str, problems: list[ProblemOut]) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.problems = problems

    @property
    def temporary(self) -> bool:
        """Worth retrying later: the gateway is overloaded or not ready yet."""
        return self.status in (429, 503)

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class InvocationFailed(ClientError):
    """An invocation of a `map` (or a batch's results) that did not succeed: failed, timed out
    or cancelled. `invocation` is it as the gateway last answered, with its exit code, failure
    reason and message."""

    def __init__(self, invocation: InvocationOut) -> None:
        why = invocation.failure_reason.value if invocation.failure_reason else invocation.state.value
        code = "" if invocation.exit_code is None else f", exit code {invocation.exit_code}"
        message = f": {invocation.message}" if invocation.message else ""
        super().__init__(f"invocation {invocation.id} {invocation.state.value} ({why}{code}){message}")
        self.invocation = invocation


def render_problem(p: ProblemOut) -> str:
    text = f"{p.field}: {p.problem}"
    return f"{text}; {p.fix}" if p.fix else text
