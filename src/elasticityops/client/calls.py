"""Every API call built as plain data, with how its answer is read back: no I/O here, so the
sync and async clients share it and tests check it without a network."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from elasticityops.client.errors import URL_ENV, ApiError, InvalidArgument, InvalidSpec, render_problem
from elasticityops.domain import invocation_annotations
from elasticityops.domain.errors import InvalidInput
from elasticityops.domain.functions import FunctionSpec, parse_function_spec
from elasticityops.domain.spec_files import load_spec_file
from elasticityops.wire import (
    BatchAccepted,
    BatchOut,
    CostReportOut,
    ErrorOut,
    FunctionDeployed,
    FunctionList,
    FunctionOut,
    HeadroomOut,
    InvocationList,
    InvocationOut,
    ProblemOut,
)

DEFAULT_URL = "http://127.0.0.1:8080"
TOKEN_ENV = "EOPS_TOKEN"

T = TypeVar("T")

# --- settings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently safe requests are retried on connection errors and 429/503."""

    attempts: int = 4  # tries in all, the first included
    first_delay_s: float = 0.2  # doubled after each try
    max_delay_s: float = 2.0  # cap for one delay, also for a server's Retry-After

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.first_delay_s * 2.0**attempt, self.max_delay_s)


@dataclass(frozen=True)
class WaitPolicy:
    """How `wait` and `invoke(wait=...)` wait for an invocation's end: by long polls, each a
    request that the server holds until the end or `long_poll_s` (`?wait=`), so the end is seen
    at once without polling fast."""

    long_poll_s: int = 20  # hold per request; well under the gateway's limit (900 s by default)
    pause_s: float = 0.5  # between requests the server answered early without the end


def wait_seconds(value: float) -> int:
    """The gateway takes whole seconds; round down so a wait never overshoots its deadline."""
    return max(0, int(value))


def hold_for(policy: WaitPolicy, now: float, deadline: float | None) -> int:
    """How long the next long poll may be held, within the deadline."""
    if deadline is None:
        return policy.long_poll_s
    return min(policy.long_poll_s, wait_seconds(deadline - now))


def refuses_hold(exc: ApiError) -> bool:
    """The gateway turned down `?wait=` itself (its EOPS_MAX_WAIT_SECONDS is below our hold):
    nothing was created or changed, so the same request without a hold is safe."""
    return exc.status == 422 and any(p.field.rsplit(".", 1)[-1] == "wait" for p in exc.problems)


def pause_after(policy: WaitPolicy, hold: int, took: float, now: float, deadline: float | None) -> float:
    """Seconds to pause before the next long poll: none when the server held the request; a
    short pause when it answered early without the end (under a second left, or a gateway
    that ignores ?wait), so waiting never turns into a busy loop."""
    if hold > 0 and took >= hold / 2:
        return 0.0
    if deadline is None:
        return policy.pause_s
    return min(policy.pause_s, max(0.0, deadline - now))


# --- pure request building ----------------------------------------------------------------


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request as plain data, with how to read its answer (`answer`)."""

    method: str
    path: str
    # A list value is a repeated parameter (?annotation=a&annotation=b).
    params: Mapping[str, str | list[str]] = field(default_factory=dict)
    # Values are sent byte for byte (Latin-1): see header_text for one that is not ASCII.
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    expect: tuple[int, ...] = (200,)
    # Safe to send twice: reads, full replacement (PUT) and POSTs with an idempotency key.
    # Requests that never left (connection refused) are retried regardless.
    repeatable: bool = False
    read_timeout_s: float | None = 30.0  # None: no limit (a log stream being followed)
    # The body of an expected answer as the caller's value; pydantic's ValidationError means
    # the body is not what this client expects (see `answer`).
    decode: Callable[[bytes], T] = field(kw_only=True, repr=False, compare=False)

    def check(self, status: int, body: bytes) -> None:
        """Raise the ApiError an unexpected status stands for."""
        if status not in self.expect:
            raise error_from(status, body)

    def answer(self, status: int, body: bytes) -> T:
        """The answer as the caller's value, or the ApiError it stands for."""
        self.check(status, body)
        try:
            return self.decode(body)
        except ValidationError as exc:
            if _looks_like_html(body):
                raise _not_a_gateway(status) from None
            raise ApiError(
                status,
                "bad_response",
                f"the gateway answered {self.method} {self.path} with a body this client cannot read "
                f"({exc.error_count()} problems); client and server versions may differ",
                [],
            ) from None


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def spec_from(source: FunctionSpec | Mapping[str, Any] | str | Path) -> FunctionSpec:
    """A FunctionSpec from a spec, a mapping, or a YAML/JSON file path; validated locally so a
    bad file is reported field by field before anything is sent. A file's relative paths are
    relative to its directory (domain/spec_files.py: `workdir`)."""
    try:
        if isinstance(source, FunctionSpec):
            return source
        if isinstance(source, Mapping):
            return parse_function_spec(source)
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidSpec(
                [
                    ProblemOut(
                        field=str(path), problem=f"cannot read it ({exc.strerror})", fix="check the path"
                    )
                ]
            ) from None
        except UnicodeDecodeError:
            raise InvalidSpec(
                [
                    ProblemOut(
                        field=str(path),
                        problem="is not UTF-8 text (a binary file?)",
                        fix="give the function's YAML or JSON spec file",
                    )
                ]
            ) from None
        return load_spec_file(text, path.resolve(), os.path.exists, source=str(path))
    except InvalidInput as exc:
        raise InvalidSpec(
            [ProblemOut(field=p.field, problem=p.problem, fix=p.fix) for p in exc.problems]
        ) from None


def _quote(segment: str) -> str:
    # Names and ids are DNS-safe when valid; quoting keeps an invalid one from changing the
    # path, so the server can answer 404/422 for it instead of routing it elsewhere.
    return quote(segment, safe="")


class Requests:
    """Builds each API call; no I/O. The clients' methods that make one call (plans.py) take
    these parameters and docs."""

    def deploy_function(self, spec: FunctionSpec) -> Call[FunctionDeployed]:
        return Call(
            "PUT",
            f"/v1/functions/{_quote(spec.name)}",
            headers={"Content-Type": "application/json"},
            content=json_bytes(spec.model_dump(mode="json")),
            expect=(200, 201),
            repeatable=True,
            decode=FunctionDeployed.model_validate_json,
        )

    def list_functions(self) -> Call[list[FunctionOut]]:
        """Every function, by name."""
        return Call("GET", "/v1/functions", repeatable=True, decode=_function_items)

    def get_function(self, name: str) -> Call[FunctionOut]:
        """One function's spec and version."""
        return Call(
            "GET", f"/v1/functions/{_quote(name)}", repeatable=True, decode=FunctionOut.model_validate_json
        )

    def delete_function(self, name: str, *, force: bool = False) -> Call[None]:
        """Remove a function; `force` fails its queued invocations and cancels its running ones
        (without it the server refuses, 409, while any are live)."""
        params = {"force": "true"} if force else {}
        return Call(
            "DELETE", f"/v1/functions/{_quote(name)}", params=params, expect=(200, 204), decode=_nothing
        )

    def invoke(
        self,
        name: str,
        payload: Any = None,
        *,
        wait: int | None = None,
        idempotency_key: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Call[InvocationOut]:
        """`payload` is sent as JSON; bytes are sent as they are (they must be JSON already);
        None sends an empty body, which the job receives as JSON null. `wait`: seconds the
        server may hold the answer until the invocation ends. `annotations`: this invocation's
        own pod annotations, keys under `eops.dev/` (such as `eops.dev/run-seconds`, how long
        the dev cluster's simulated pod runs), checked here as the gateway checks them."""
        body = payload if isinstance(payload, bytes) else (b"" if payload is None else json_bytes(payload))
        headers = {"Content-Type": "application/json"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = header_text(idempotency_key, "idempotency key")
        params: dict[str, str | list[str]] = {**_wait_param(wait)}
        if annotations:
            params["annotation"] = _annotation_params(annotations)
        return Call(
            "POST",
            f"/v1/functions/{_quote(name)}/invocations",
            params=params,
            headers=headers,
            content=body,
            expect=(200, 201, 202),
            repeatable=idempotency_key is not None,
            read_timeout_s=_read_timeout(wait),
            decode=InvocationOut.model_validate_json,
        )

    def invoke_batch(
        self,
        name: str,
        inputs: Sequence[Any],
        *,
        idempotency_key: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Call[BatchAccepted]:
        """One invocation per input (each sent as JSON, as `invoke`'s payload), accepted whole or
        not at all, in one request: the batch id and the invocation ids in input order. At most
        the gateway's EOPS_MAX_BATCH_INPUTS inputs (1,000 by default); `map` splits more.
        `idempotency_key`: a retry returns the same batch (and makes the request safe to retry);
        `annotations`: every invocation's own pod annotations, as `invoke`'s."""
        headers = {"Content-Type": "application/json"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = header_text(idempotency_key, "idempotency key")
        params: dict[str, str | list[str]] = {}
        if annotations:
            params["annotation"] = _annotation_params(annotations)
        return Call(
            "POST",
            f"/v1/functions/{_quote(name)}/invocations:batch",
            params=params,
            headers=headers,
            content=json_bytes({"inputs": list(inputs)}),
            expect=(202,),
            repeatable=idempotency_key is not None,
            read_timeout_s=120.0,  # a thousand inputs stored in one transaction
            decode=BatchAccepted.model_validate_json,
        )

    def get_batch(
        self, batch_id: str, *, state: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Call[BatchOut]:
        """A batch: how many of its invocations are in each state, and a page of them in input
        order (`next_cursor` asks for the next)."""
        params = {
            key: str(value)
            for key, value in (("state", state), ("limit", limit), ("cursor", cursor))
            if value is not None
        }
        return Call(
            "GET",
            f"/v1/batches/{_quote(batch_id)}",
            params=params,
            repeatable=True,
            decode=BatchOut.model_validate_json,
        )

    def cancel_batch(self, batch_id: str) -> Call[BatchOut]:
        """Cancel every invocation of the batch that has not ended; the batch as it is then."""
        return Call(
            "POST",
            f"/v1/batches/{_quote(batch_id)}:cancel",
            repeatable=True,  # cancelling again is a no-op
            read_timeout_s=120.0,
            decode=BatchOut.model_validate_json,
        )

    def get_invocation(self, invocation_id: str, *, wait: int | None = None) -> Call[InvocationOut]:
        """An invocation's state; with `wait`, the server holds the answer up to that many
        seconds until it ends."""
        return Call(
            "GET",
            f"/v1/invocations/{_quote(invocation_id)}",
            params=_wait_param(wait),
            repeatable=True,
            read_timeout_s=_read_timeout(wait),
            decode=InvocationOut.model_validate_json,
        )

    def list_invocations(
        self,
        *,
        function: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        batch: str | None = None,
    ) -> Call[InvocationList]:
        """One page of invocations, newest first; its `next_cursor` asks for the next. `batch`:
        only that batch's."""
        pairs = (
            ("function", function),
            ("state", state),
            ("limit", limit),
            ("cursor", cursor),
            ("batch", batch),
        )
        params = {key: str(value) for key, value in pairs if value is not None}
        return Call(
            "GET",
            "/v1/invocations",
            params=params,
            repeatable=True,
            decode=InvocationList.model_validate_json,
        )

    def logs(self, invocation_id: str, *, follow: bool = False, attempt: int | None = None) -> Call[str]:
        """The output as text; clients stream it (`answer` reads a whole body at once). `attempt`:
        an earlier attempt's (0 the first; the default is the current one's)."""
        params = {"follow": "true"} if follow else {}
        if attempt is not None:
            params["attempt"] = str(attempt)
        return Call(
            "GET",
            f"/v1/invocations/{_quote(invocation_id)}/logs",
            params=params,
            # A half-read stream cannot be resumed without repeating output: no retries.
            repeatable=False,
            read_timeout_s=None if follow else 30.0,
            decode=_text,
        )

    def cancel(self, invocation_id: str) -> Call[InvocationOut]:
        """Cancel a queued or running invocation; its state as the server has it then: cancelled
        (200), or, from a gateway replica that does not run it, still active with
        `cancel_requested_at` set (202: the replica running it stops it shortly)."""
        return Call(
            "POST",
            f"/v1/invocations/{_quote(invocation_id)}/cancel",
            expect=(200, 202),
            decode=InvocationOut.model_validate_json,
        )

    def headroom(self) -> Call[HeadroomOut]:
        """The warm capacity: the policy, and per shape what is wanted and held."""
        return Call("GET", "/v1/headroom", repeatable=True, decode=HeadroomOut.model_validate_json)

    def cost_report(self, *, since: str = "24h", by: Sequence[str] = ()) -> Call[CostReportOut]:
        """Node-seconds and their cost by phase since `since` (90m, 24h, 7d or an ISO time),
        grouped `by` any of function, hour, capacity and cluster (none: one total)."""
        return Call(
            "GET",
            "/v1/cost",
            params={"since": since, "by": list(by)},
            repeatable=True,
            decode=CostReportOut.model_validate_json,
        )

    def cost_csv(self, *, since: str = "24h", by: Sequence[str] = ()) -> Call[str]:
        """The same report as CSV text: one line per group, a column per phase."""
        return Call(
            "GET",
            "/v1/cost",
            params={"since": since, "by": list(by), "format": "csv"},
            repeatable=True,
            decode=_text,
        )

    def health(self) -> Call[dict[str, Any]]:
        """The gateway's readiness answer (/readyz); an error when it is not ready."""
        return Call("GET", "/readyz", repeatable=True, decode=as_dict)


def next_page(call: Call[InvocationList], page: InvocationList) -> Call[InvocationList] | None:
    """The list call for the page after `page`, or None when it was the last."""
    if not page.next_cursor or not page.items:
        return None
    return replace(call, params={**call.params, "cursor": page.next_cursor})


def _annotation_params(annotations: Mapping[str, str]) -> list[str]:
    try:
        checked = invocation_annotations.check(annotations, "annotations")
    except InvalidInput as exc:
        raise InvalidArgument(
            [ProblemOut(field=p.field, problem=p.problem, fix=p.fix) for p in exc.problems]
        ) from None
    return [f"{key}={value}" for key, value in checked.items()]


def _wait_param(wait: int | None) -> dict[str, str]:
    return {"wait": str(wait)} if wait else {}


def _read_timeout(wait: int | None) -> float:
    # The server holds the request up to `wait` seconds before it answers.
    return 30.0 + (wait or 0)


# --- pure answer reading ------------------------------------------------------------------


def error_from(status: int, body: bytes) -> ApiError:
    """The server's ErrorOut as an ApiError; anything else (a proxy's HTML page, a crash)
    still becomes an ApiError with what it said."""
    try:
        err = ErrorOut.model_validate_json(body).error
        return ApiError(status, err.code, err.message, list(err.problems))
    except ValidationError:
        pass
    # FastAPI's own validation answer, should one slip past the server's error mapping.
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and "detail" in data:
        detail = data["detail"]
        if isinstance(detail, list):
            problems = [
                ProblemOut(
                    field=".".join(str(x) for x in item.get("loc", [])) or "(request)",
                    problem=str(item.get("msg", "")),
                )
                for item in detail
                if isinstance(item, dict)
            ]
            return ApiError(status, "invalid_input", "; ".join(map(render_problem, problems)), problems)
        return ApiError(status, _code_for(status), str(detail), [])
    if _looks_like_html(body):
        return _not_a_gateway(status)
    text = body.decode("utf-8", errors="replace").strip()
    return ApiError(status, _code_for(status), text[:300] or f"HTTP {status}", [])


def _looks_like_html(body: bytes) -> bool:
    head = body.lstrip()[:200].lower()
    return head.startswith((b"<!doctype", b"<html", b"<?xml", b"<head", b"<body"))


def _not_a_gateway(status: int) -> ApiError:
    return ApiError(
        status,
        _code_for(status),
        f"what answered is not an ElasticityOps gateway (HTTP {status} with an HTML page: another "
        f"server, or a proxy in front); check {URL_ENV}: it should point at `eops serve`",
        [],
    )


def _code_for(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        409: "conflict",
        413: "payload_too_large",
        422: "invalid_input",
        429: "too_many_requests",
        503: "temporarily_unavailable",
    }.get(status, "server_error" if status >= 500 else "http_error")


def _function_items(body: bytes) -> list[FunctionOut]:
    return FunctionList.model_validate_json(body).items


def _nothing(body: bytes) -> None:
    return None


def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def retry_after_of(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def never_sent(exc: httpx.TransportError) -> bool:
    """The request never reached the server, so even a non-repeatable one may be retried."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def describe(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in str(exc).lower() else f"cannot connect: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def timeout_for(call: Call[Any]) -> httpx.Timeout:
    return httpx.Timeout(10.0, read=call.read_timeout_s)


def http_request(http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    """The httpx request for `call` on either client (building it sends nothing)."""
    return http.build_request(
        call.method,
        call.path,
        params=call.params,
        headers=[(name.encode("latin-1"), value.encode("latin-1")) for name, value in call.headers.items()],
        content=call.content,
        timeout=timeout_for(call),
    )


def settings(url: str | None, token: str | None) -> tuple[str, str | None]:
    """The base URL and token, from the arguments or EOPS_URL / EOPS_TOKEN, checked here: one
    that cannot be sent is InvalidArgument naming where it came from, before any request."""
    url_from = "url" if url else URL_ENV
    base = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
    token_from = "token" if token is not None else TOKEN_ENV
    token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
    problems = _url_problems(base, url_from)
    if token is not None:
        problems += _header_problems(token, token_from, ascii_only=True)
    if problems:
        raise InvalidArgument(problems)
    return base, token


def _url_problems(base: str, where: str) -> list[ProblemOut]:
    fix = f"set {where} to the gateway's URL, e.g. {DEFAULT_URL}"
    try:
        parsed = httpx.URL(base)
        parsed.port  # noqa: B018 (parses the port, which may be bad)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        return [ProblemOut(field=where, problem=f"{base!r} is not a URL ({exc})", fix=fix)]
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return [ProblemOut(field=where, problem=f"{base!r} is not an http(s) URL with a host", fix=fix)]
    return []


def _header_problems(value: str, where: str, *, ascii_only: bool) -> list[ProblemOut]:
    """What keeps `value` out of an HTTP header: control characters (a newline would end the
    header), and for a token anything but ASCII (tokens are ASCII: a different one was pasted)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return [ProblemOut(field=where, problem="holds a control character (a newline?)", fix="remove it")]
    if ascii_only and not value.isascii():
        return [
            ProblemOut(
                field=where,
                problem="holds non-ASCII characters; tokens are ASCII",
                fix="copy the token again (`eops serve` prints it; `eops token create` makes one)",
            )
        ]
    return []


def header_text(value: str, where: str) -> str:
    """A header value as it goes on the wire: its UTF-8 bytes (the gateway reads
    Idempotency-Key as UTF-8), one character per byte, which `http_request` sends as bytes;
    InvalidArgument for a control character."""
    problems = _header_problems(value, where, ascii_only=False)
    if problems:
        raise InvalidArgument(problems)
    return value.encode("utf-8").decode("latin-1")


def as_dict(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {"status": body.decode("utf-8", errors="replace").strip()}
    return data if isinstance(data, dict) else {"status": data}
