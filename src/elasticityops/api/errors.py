"""The one place where errors become HTTP answers.

Domain errors (domain/errors.py) carry their status and code; request validation errors and
Starlette's own (unknown route, wrong method) are translated here too. Every answer is an
`ErrorOut` whose problems name the field and the fix. Anything else is a bug: it is logged with
an incident id and answered with a clear message instead of a bare traceback."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput, TemporaryError
from elasticityops.domain.functions import validation_fix
from elasticityops.wire import ErrorBody, ErrorOut, ProblemOut

log = logging.getLogger("elasticityops.api")


class MalformedBody(InvalidInput):
    """The body could not be parsed at all (as opposed to parsed but invalid)."""

    status_code = 400
    code = "malformed_body"


def error_response(
    status: int,
    code: str,
    message: str,
    problems: Sequence[FieldProblem] = (),
    headers: dict[str, str] | None = None,
) -> Response:
    body = ErrorOut(
        error=ErrorBody(
            code=code,
            message=message,
            problems=[ProblemOut(field=p.field, problem=p.problem, fix=p.fix) for p in problems],
        )
    )
    return Response(
        content=body.model_dump_json(), status_code=status, media_type="application/json", headers=headers
    )


def eops_error_response(exc: EopsError) -> Response:
    problems = exc.problems if isinstance(exc, InvalidInput) else ()
    headers: dict[str, str] | None = None
    if isinstance(exc, TemporaryError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
    elif exc.status_code == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return error_response(exc.status_code, exc.code, exc.message, problems, headers)


def validation_problems(errors: Sequence[Any]) -> list[FieldProblem]:
    out: list[FieldProblem] = []
    for item in errors:
        loc = [str(part) for part in item.get("loc", ())]
        where = loc[0] if loc else ""
        name = ".".join(loc[1:]) or "(body)"
        if where == "header":
            name = f"header {name}"
        elif where == "body":
            name = f"(body).{name}" if len(loc) > 1 else "(body)"
        fix = validation_fix(str(item.get("type", "")))
        out.append(FieldProblem(name, str(item.get("msg", "invalid")), fix))
    return out


def install(app: FastAPI) -> None:
    @app.exception_handler(EopsError)
    async def _eops(_request: Request, exc: EopsError) -> Response:
        if exc.status_code >= 500:
            log.warning("answering %s: %s", exc.status_code, exc.message)
        return eops_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> Response:
        problems = validation_problems(exc.errors())
        return error_response(422, "invalid_input", "; ".join(p.render() for p in problems), problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}; see /docs for the API"
            return error_response(404, "not_found", message)
        if exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}; see /docs for the API"
            return error_response(405, "method_not_allowed", message, headers=dict(exc.headers or {}))
        return error_response(exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        incident = uuid.uuid4().hex[:12]
        log.exception("incident %s: unhandled error on %s %s", incident, request.method, request.url.path)
        return error_response(
            500,
            "internal",
            f"the server hit a bug (incident {incident}); it is logged on the server; "
            "please report it with the incident id",
        )
