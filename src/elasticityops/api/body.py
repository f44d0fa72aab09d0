"""Reading request bodies within the size limit, and parsing them with clear errors."""

from __future__ import annotations

import re
from typing import Any

import orjson
import yaml
from fastapi import Request
from starlette.requests import ClientDisconnect

from elasticityops.api.errors import MalformedBody
from elasticityops.domain.errors import FieldProblem, InvalidInput, PayloadTooLarge
from elasticityops.domain.functions import MAX_NESTING, check_yaml_nesting

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")

LIMIT_SETTING = "--max-payload-bytes / EOPS_MAX_PAYLOAD_BYTES"


def _too_large(limit: int, why: str | None) -> PayloadTooLarge:
    if why is not None:
        return PayloadTooLarge(
            f"the request body is larger than the limit of {limit} bytes ({why}); send less "
            "(e.g. a reference to the data instead of the data)"
        )
    return PayloadTooLarge(
        f"the request body is larger than the limit of {limit} bytes; send less "
        f"(e.g. a reference to the data instead of the data) or raise the limit with {LIMIT_SETTING}"
    )


async def read_body(request: Request, limit: int, why: str | None = None) -> bytes:
    """The whole body, refusing early (by Content-Length) or as soon as it passes `limit`.
    `why`: what sets the limit when it is not the setting (the backend's own limit)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, why)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit, why)
            chunks.append(chunk)
    except ClientDisconnect:
        # The client half-closed or left before its Content-Length came: a 4xx nobody may read,
        # rather than an exception in the ASGI application.
        raise MalformedBody(
            [
                FieldProblem(
                    "(body)",
                    f"the connection ended after {size} bytes of the body, before its end",
                    "send the whole body (as many bytes as Content-Length says)",
                )
            ]
        ) from None
    return b"".join(chunks)


def parse_json(body: bytes, what: str = "(body)") -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(
            [
                FieldProblem(
                    what, f"not valid JSON: {exc}", "send a JSON document with Content-Type: application/json"
                )
            ]
        ) from None


def _too_deep(max_depth: int) -> MalformedBody:
    return MalformedBody([FieldProblem("(body)", f"nested deeper than {max_depth} levels", "flatten it")])


def check_json_nesting(body: bytes, max_depth: int = MAX_NESTING) -> None:
    """Refuse JSON nested deeper than `max_depth`, before parsing (brackets outside strings)."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub(b"", body)):
        if bracket.group() in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise _too_deep(max_depth)
        else:
            depth -= 1


def parse_json_or_yaml(body: bytes, content_type: str) -> Any:
    """JSON by default; YAML when the content type says so (a YAML parser also reads JSON).
    Either way nested at most MAX_NESTING deep, checked before parsing (400 beyond)."""
    if "yaml" not in content_type:
        check_json_nesting(body)
        return parse_json(body)
    try:
        text = body.decode("utf-8")
        try:
            check_yaml_nesting(text, "(body)")
        except InvalidInput:
            raise _too_deep(MAX_NESTING) from None
        return yaml.safe_load(text)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        raise MalformedBody([FieldProblem("(body)", f"not valid YAML{where}", "fix the syntax")]) from None
