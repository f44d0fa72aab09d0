"""Batches: many invocations of one function in one request, and a batch read, followed and
cancelled as one.

POST /v1/functions/{name}/invocations:batch takes `{"inputs": [...]}`, each input what a single
invocation's body would be. The whole body is checked before anything is stored (a bad input is
named by its index, and nothing is accepted), then the batch and all its invocations are stored
in one transaction. Each input is an invocation of its own (own id, timeline, retries, cost),
queued and admitted like any other; its JSON names its `batch_id`."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from fastapi import APIRouter, Path, Query, Request, Response

from elasticityops.api.batch_body import input_bytes
from elasticityops.api.batch_events import batch_events_response
from elasticityops.api.body import parse_json, read_body
from elasticityops.api.encode import invocation_document
from elasticityops.api.entropy import BufferedEntropy
from elasticityops.api.invocations_routes import (
    annotations_param,
    check_cursor,
    key_param,
    payload_limit,
    webhook_param,
)
from elasticityops.api.runtime import Runtime
from elasticityops.api.webhook_params import PARAMS as WEBHOOK_PARAMS
from elasticityops.domain.batches import BATCH_PREFIX, Batch, ids_in_input_order, item_key, new_batch_id
from elasticityops.domain.errors import Conflict, FieldProblem, InvalidInput, NotFound
from elasticityops.domain.invocations import State
from elasticityops.domain.numbers import WholeNumber
from elasticityops.domain.ports import NewInvocation
from elasticityops.pricing.table import capacity_of_backend
from elasticityops.wire import MAX_PAGE_SIZE, BatchAccepted, BatchIn, BatchOut, ErrorOut

BATCH_PATH = "/functions/{name}/invocations:batch"
_OPTIONS = orjson.OPT_UTC_Z
_SHOWN_PROBLEMS = 20  # of a batch with many bad inputs: enough to see the pattern
_CANCELS_AT_ONCE = 64  # a batch's cancels go to the dispatcher this many at a time

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "missing or wrong token"},
    404: {"model": ErrorOut, "description": "no such function or batch"},
    422: {"model": ErrorOut, "description": "invalid input; each problem names the field and the fix"},
}
BatchIdPath = Path(description="batch id (bat-...)", max_length=100)


class InputTooLarge(InvalidInput):
    """One or more inputs over the payload limit: named by index, as a 413."""

    status_code = 413
    code = "payload_too_large"


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def build_router() -> APIRouter:
    router = APIRouter(tags=["batches"])
    entropy = BufferedEntropy()

    @router.post(
        BATCH_PATH,
        status_code=202,
        response_model=BatchAccepted,
        responses={
            **_ERRORS,
            202: {
                "model": BatchAccepted,
                "description": "accepted: the batch id and one invocation id per input",
            },
            400: {
                "model": ErrorOut,
                "description": "the body is not JSON, or the Idempotency-Key is not UTF-8",
            },
            413: {
                "model": ErrorOut,
                "description": "the body, or one of its inputs (named), is over its limit",
            },
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "the inputs, one invocation each",
                "content": {"application/json": {"schema": BatchIn.model_json_schema()}},
            }
        },
        summary="Invoke a function once per input (a batch)",
        description=(
            "Checks the whole body first: a bad input is named by its index (`inputs[17]`) and "
            "nothing is accepted. Then stores the batch and one invocation per input in one "
            "transaction and answers 202 with the batch id and the invocation ids in input order. "
            "Each input is what a single invocation's body would be (the job gets its bytes as "
            "sent), held to the same payload limit; the batch's size is limited by "
            "EOPS_MAX_BATCH_INPUTS "
            "(1,000 by default) and EOPS_MAX_BATCH_BYTES. Each invocation is queued and admitted "
            "like any other, and names its batch (`batch_id`). The same `Idempotency-Key` for the "
            "same function returns the batch it made first, with the same ids (header "
            "`Idempotent-Replayed: true`); its invocations carry the keys `KEY#0`, `KEY#1`, ... "
            "`?annotation=KEY=VALUE` (repeatable) applies to every invocation of the batch, as on "
            "the single route, and so do `?webhook=URL&webhook_events=...&webhook_include_result=...`: "
            "each invocation's events go to its function's webhook, or to this one."
        ),
    )
    async def invoke_batch(
        request: Request,
        name: str = Path(description="the function's name", max_length=200),
        annotation: list[str] | None = Query(
            None,
            description="a pod annotation of every invocation of the batch, KEY=VALUE (see the single route)",
        ),
    ) -> Response:
        rt = _runtime(request)
        key = key_param(request.headers.get("idempotency-key"))
        annotations = annotations_param(annotation or [])
        record = await rt.functions.get(name)
        if record is None:
            raise NotFound(f"no function named {name!r}; deploy it first (eops fn deploy FILE)")
        webhook = record.spec.webhook
        if any(p in request.query_params for p in WEBHOOK_PARAMS):
            webhook = await webhook_param(rt, name, webhook, request.query_params)
        api = rt.settings.api
        body = await read_body(
            request,
            api.max_batch_bytes,
            "the batch limit; split the inputs into smaller batches, or raise --max-batch-bytes / "
            "EOPS_MAX_BATCH_BYTES",
        )
        payloads = _payloads(body, parse_json(body), api.max_batch_inputs, *payload_limit(rt))
        accepted = rt.clock.now()
        batch = Batch(
            id=new_batch_id(entropy, at=accepted),
            function=name,
            created_at=accepted,
            count=len(payloads),
            idempotency_key=key,
        )
        ids = ids_in_input_order(len(payloads), entropy, at=accepted)
        news = [
            NewInvocation(
                id=ids[i],
                function=name,
                spec_version=record.version,
                priority_rank=record.spec.priority.rank,
                accepted_at=accepted,
                payload=payload,
                idempotency_key=item_key(key, i),
                annotations=annotations,
                batch_id=batch.id,
                webhook=webhook,
            )
            for i, payload in enumerate(payloads)
        ]
        batch, invocations, created = await rt.store.create_batch(batch, news)
        if created:
            rt.metrics.accepted.inc(len(invocations))
            rt.hub.work_available()  # once: the dispatcher reads the queue in pages
            for inv in invocations:
                rt.hub.changed(inv.id)  # the console's live list (api/console/feed.py)
        document = {
            "batch_id": batch.id,
            "function": batch.function,
            "count": batch.count,
            "invocation_ids": [inv.id for inv in invocations],
            "created_at": batch.created_at,
        }
        return Response(
            content=orjson.dumps(document, option=_OPTIONS),
            status_code=202,
            media_type="application/json",
            headers=None if created else {"Idempotent-Replayed": "true"},
        )

    @router.get(
        "/batches/{batch_id}",
        response_model=BatchOut,
        responses=_ERRORS,
        summary="Read a batch: counts by state and a page of its invocations",
        description="Its invocations in input order, a page at a time (`next_cursor`), each as "
        "GET /v1/invocations lists them (a result's summary, not the result: read one "
        "invocation for that).",
    )
    async def get_batch(
        request: Request,
        batch_id: str = BatchIdPath,
        state: State | None = Query(None, description="only its invocations in this state"),
        limit: WholeNumber = Query(100, ge=1, le=MAX_PAGE_SIZE, description="page size"),
        cursor: str | None = Query(None, max_length=100, description="next_cursor of the previous page"),
    ) -> Response:
        rt = _runtime(request)
        check_cursor(cursor)
        return await _batch_response(rt, batch_id, state, limit, cursor)

    @router.get(
        "/batches/{batch_id}/events",
        responses={
            **_ERRORS,
            200: {"content": {"text/event-stream": {}}, "description": "server-sent events"},
            503: {
                "model": ErrorOut,
                "description": "too many streams are open on this replica, or by this token",
            },
        },
        summary="Its invocations as each ends (server-sent events)",
        description="Frames: `hello` first; `ended` with an invocation (as a list item) for each "
        "of the batch's invocations that has ended, those ended before the stream opened first; "
        "`done` with the batch's counts once every one has ended, and the stream ends. It ends "
        "too when its token is revoked or expires, and when the gateway stops; stream limits "
        "are the console's (EOPS_CONSOLE_MAX_STREAMS, ..._PER_TOKEN).",
    )
    async def batch_events(request: Request, batch_id: str = BatchIdPath) -> Response:
        rt = _runtime(request)
        await _batch_or_404(rt, batch_id)
        return await batch_events_response(rt, request, batch_id)

    @router.post(
        "/batches/{batch_id}:cancel",
        response_model=BatchOut,
        responses=_ERRORS,
        summary="Cancel every invocation of a batch that has not ended",
        description="Each as POST /v1/invocations/{id}/cancel would: a queued one never runs, a "
        "pending or running one's job is stopped. Those that ended meanwhile are left as they "
        "ended. Answers the batch as GET /v1/batches/{id} does, after the cancels.",
    )
    async def cancel_batch(request: Request, batch_id: str = BatchIdPath) -> Response:
        rt = _runtime(request)
        await _batch_or_404(rt, batch_id)
        unended = [i for i, state in await rt.store.batch_states(batch_id) if not state.terminal]
        gate = asyncio.Semaphore(_CANCELS_AT_ONCE)

        async def cancel(invocation_id: str) -> None:
            async with gate:
                # One that ended otherwise meanwhile is left as it ended.
                with contextlib.suppress(Conflict, NotFound):
                    await rt.dispatcher.cancel(invocation_id)

        await asyncio.gather(*(cancel(i) for i in unended))
        return await _batch_response(rt, batch_id, None, 100, None)

    return router


async def _batch_or_404(rt: Runtime, batch_id: str) -> None:
    if not batch_id.startswith(BATCH_PREFIX) or await rt.store.get_batch(batch_id) is None:
        raise NotFound(f"no batch {batch_id!r}; a batch's id (bat-...) is in the answer to its POST")


async def _batch_response(
    rt: Runtime, batch_id: str, state: State | None, limit: int, cursor: str | None
) -> Response:
    status = await rt.store.get_batch(batch_id) if batch_id.startswith(BATCH_PREFIX) else None
    if status is None:
        raise NotFound(f"no batch {batch_id!r}; a batch's id (bat-...) is in the answer to its POST")
    page = await rt.store.list_invocations(
        function=None, state=state, limit=limit, cursor=cursor, batch=batch_id, oldest_first=True
    )
    unnamed = capacity_of_backend(rt.settings.backend)
    batch = status.batch
    document = {
        "id": batch.id,
        "function": batch.function,
        "created_at": batch.created_at,
        "count": batch.count,
        "idempotency_key": batch.idempotency_key,
        "counts": {s.value: status.counts.get(s, 0) for s in State},
        "ended": status.ended,
        "done": status.done,
        "items": [
            invocation_document(i, unnamed=unnamed, listed=True, brief=page.summaries.get(i.id))
            for i in page.items
        ],
        "next_cursor": page.next_cursor,
    }
    return Response(content=orjson.dumps(document, option=_OPTIONS), media_type="application/json")


def _payloads(body: bytes, document: Any, max_inputs: int, max_bytes: int, why: str | None) -> list[bytes]:
    """Each input as the payload its invocation gets (its bytes as sent), once the whole body
    is known good; else every problem, by index (the first few of many)."""
    if not isinstance(document, dict):
        raise InvalidInput(
            [FieldProblem("(body)", f"is a JSON {_kind(document)}", 'send an object: {"inputs": [...]}')]
        )
    extra = sorted(set(document) - {"inputs"})
    if extra:
        raise InvalidInput(
            [FieldProblem(extra[0], "is not a field of a batch", 'send only {"inputs": [...]}')]
        )
    if "inputs" not in document:
        raise InvalidInput(
            [FieldProblem("inputs", "is missing", 'send {"inputs": [...]}, one item per invocation')]
        )
    inputs = document["inputs"]
    if not isinstance(inputs, list):
        raise InvalidInput(
            [FieldProblem("inputs", f"is a JSON {_kind(inputs)}", "send a list, one item per invocation")]
        )
    if not inputs:
        raise InvalidInput([FieldProblem("inputs", "is empty", "send at least one input")])
    if len(inputs) > max_inputs:
        raise InvalidInput(
            [
                FieldProblem(
                    "inputs",
                    f"holds {len(inputs)} inputs, over the most a batch may hold ({max_inputs})",
                    f"split them into batches of at most {max_inputs} (the client's map does), or "
                    "raise --max-batch-inputs / EOPS_MAX_BATCH_INPUTS",
                )
            ]
        )
    payloads = input_bytes(body, len(inputs)) or [_written_out(i, item) for i, item in enumerate(inputs)]
    too_large = [i for i, p in enumerate(payloads) if len(p) > max_bytes]
    if too_large:
        limit = f"the limit of {max_bytes} bytes" + (f" ({why})" if why else "")
        problems = [
            FieldProblem(
                f"inputs[{i}]",
                f"is {len(payloads[i])} bytes as JSON, over {limit}",
                "send less (e.g. a reference to the data instead of the data)",
            )
            for i in too_large[:_SHOWN_PROBLEMS]
        ]
        if len(too_large) > _SHOWN_PROBLEMS:
            problems.append(
                FieldProblem("inputs", f"{len(too_large) - _SHOWN_PROBLEMS} more inputs are over it too", "")
            )
        raise InputTooLarge(problems)
    return payloads


def _written_out(index: int, item: Any) -> bytes:
    """An input as JSON written anew: only where its bytes could not be cut from the body."""
    try:
        return orjson.dumps(item)
    except TypeError:  # orjson writes at most 254 levels deep
        raise InvalidInput(
            [FieldProblem(f"inputs[{index}]", "is nested too deep to store", "flatten it")]
        ) from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}.get(
        type(value), type(value).__name__
    )
