"""/v1/.../invocations: accept, read, list, wait for, cancel, follow logs, hand back results."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.routing import Route

from elasticityops.api.auth import caller_token, token_digest
from elasticityops.api.body import parse_json, read_body
from elasticityops.api.cost_routes import cost_of
from elasticityops.api.encode import invocation_json, invocation_list_json
from elasticityops.api.entropy import BufferedEntropy
from elasticityops.api.errors import MalformedBody
from elasticityops.api.held_open import Hold
from elasticityops.api.log_follow import logs_response
from elasticityops.api.runtime import Runtime
from elasticityops.api.waiting import get_or_404, held_wait, wait_for_end
from elasticityops.api.webhook_params import PARAMS as WEBHOOK_PARAMS
from elasticityops.api.webhook_params import override as webhook_override
from elasticityops.dispatch.queue_status import queue_status
from elasticityops.domain import invocation_annotations as hints
from elasticityops.domain.errors import (
    Conflict,
    FieldProblem,
    InvalidInput,
    NotFound,
    Unauthorized,
)
from elasticityops.domain.invocations import Invocation, State, check_callback_token, new_invocation_id
from elasticityops.domain.node_seconds import InvocationCost
from elasticityops.domain.numbers import WholeNumber, WholeNumberOrNone, whole_number
from elasticityops.domain.ports import NewInvocation
from elasticityops.domain.queue import QueueStatus
from elasticityops.domain.results import as_stored
from elasticityops.domain.tokens import Scope
from elasticityops.domain.webhook_spec import WebhookSpec
from elasticityops.pricing.table import capacity_of_backend
from elasticityops.wire import MAX_PAGE_SIZE, ErrorOut, InvocationList, InvocationOut

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "missing or wrong token"},
    404: {"model": ErrorOut, "description": "no such function or invocation"},
    422: {"model": ErrorOut, "description": "invalid input; each problem names the field and the fix"},
}
_PAYLOAD_BODY = {
    "requestBody": {
        "required": False,
        "description": "the payload: any JSON document (empty body: null), handed to the job as a file",
        "content": {"application/json": {"schema": {}}},
    }
}
IdPath = Path(description="invocation id (inv-...)", max_length=100)
_ID_PREFIX = "inv-"
_MAX_KEY = 200
# The one parser of numbers (domain/numbers.py) for query parameters too: `?wait=` in full-width digits or
# `?limit=true` are refused on every route alike.
ACCEPT_PATH = "/v1/functions/{name}/invocations"
# A repeated query parameter rather than a header: the body is the payload as sent, and a query
# parameter is what curl, the OpenAPI page and the client can all repeat without folding rules.
ANNOTATION_PARAM = "annotation"


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _json(
    rt: Runtime,
    inv: Invocation,
    status: int,
    headers: dict[str, str] | None = None,
    queue: QueueStatus | None = None,
    cost: InvocationCost | None = None,
) -> Response:
    return Response(
        content=invocation_json(inv, queue, cost, unnamed=capacity_of_backend(rt.settings.backend)),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _wait_query(max_wait: int) -> object:
    return Query(
        None,
        ge=0,
        le=max_wait,
        description=f"hold the answer until the invocation ends, at most this many seconds "
        f"(<= {max_wait}); answered at once when the gateway begins to stop",
    )


def build_router(max_wait: int) -> APIRouter:
    router = APIRouter(tags=["invocations"])
    wait_query = _wait_query(max_wait)

    @router.get(
        "/invocations/{invocation_id}",
        response_model=InvocationOut,
        responses=_ERRORS,
        summary="Read an invocation: state, timeline, exit code, result",
    )
    async def get_invocation(
        request: Request,
        invocation_id: str = IdPath,
        wait: WholeNumberOrNone = wait_query,  # type: ignore[assignment]
    ) -> Response:
        rt = _runtime(request)
        inv = await get_or_404(rt, invocation_id)
        if wait:
            inv = await held_wait(rt, token_digest(request), inv, wait)
        # Only here, for one invocation: a few grouped counts, too many to make for every list item.
        queue = await queue_status(inv, rt.store, rt.functions, rt.backend, rt.settings.dispatch)
        return _json(rt, inv, 200, queue=queue, cost=await cost_of(rt, inv))

    @router.get(
        "/invocations",
        response_model=InvocationList,
        responses=_ERRORS,
        summary="List invocations, newest first",
        description=(
            "A page of invocations by keyset (`next_cursor`). Each item is what "
            "`GET /v1/invocations/{id}` answers, but for its result: `result` is null and "
            "`result_summary` gives the result's size and the start of its JSON text (a page of "
            "500 results of 1 MiB would be half a gigabyte); `queue_position`, `queue_reason` "
            "and `cost` are null too. Read one invocation for those."
        ),
    )
    async def list_invocations(
        request: Request,
        function: str | None = Query(None, max_length=200, description="only this function's"),
        state: State | None = Query(None, description="only those in this state"),
        limit: WholeNumber = Query(50, ge=1, le=MAX_PAGE_SIZE, description="page size"),
        cursor: str | None = Query(None, max_length=100, description="next_cursor of the previous page"),
        batch: str | None = Query(None, max_length=100, description="only this batch's (bat-...)"),
    ) -> Response:
        rt = _runtime(request)
        check_cursor(cursor)
        page = await rt.store.list_invocations(
            function=function, state=state, limit=limit, cursor=cursor, batch=batch
        )
        return Response(
            content=invocation_list_json(
                page.items,
                page.next_cursor,
                unnamed=capacity_of_backend(rt.settings.backend),
                summaries=page.summaries,
            ),
            media_type="application/json",
        )

    @router.post(
        "/invocations/{invocation_id}/cancel",
        response_model=InvocationOut,
        responses={
            **_ERRORS,
            200: {"model": InvocationOut, "description": "cancelled (state `cancelled`)"},
            202: {
                "model": InvocationOut,
                "description": "asked of a gateway replica whose dispatcher does not run: the cancel "
                "is recorded (`cancel_requested_at`) and the replica that runs the job had not "
                "stopped it within the wait (EOPS_CANCEL_WAIT_SECONDS); it will, and the "
                "invocation then ends `cancelled` (see it with GET /v1/invocations/{id})",
            },
            409: {"model": ErrorOut, "description": "it has already ended otherwise"},
        },
        summary="Cancel an invocation",
        description="Queued: it never runs. Pending or running: its process or Job is killed. "
        "Cancelling a cancelled invocation again is a no-op. On a replica whose dispatcher does "
        "not run (docs/high-availability.md), a pending or running invocation's cancel is "
        "recorded for the replica that runs it, and the answer waits a few seconds for it: 200 "
        "once it is cancelled, else 202 with the request recorded.",
    )
    async def cancel(request: Request, invocation_id: str = IdPath) -> Response:
        return await _cancel(_runtime(request), invocation_id, token_digest(request))

    @router.get(
        "/invocations/{invocation_id}/logs",
        responses={
            **_ERRORS,
            200: {"content": {"text/plain": {}}, "description": "the job's output"},
            404: {
                "model": ErrorOut,
                "description": "no such invocation, or the backend no longer has that attempt's output "
                "(Kubernetes: its pod is gone; the message says why)",
            },
        },
        response_class=StreamingResponse,
        summary="The job's output (stdout and stderr)",
        description="Each attempt of an invocation (`attempt` counts them: a preempted one, or one "
        "whose node was lost, is requeued as the next) is a job of its own with an output of its "
        "own: the current one's unless `attempt` asks for another.",
    )
    async def logs(
        request: Request,
        invocation_id: str = IdPath,
        follow: bool = Query(
            False,
            description="keep streaming until the invocation ends (waiting for a queued one to start, "
            "at most the longest ?wait); an earlier attempt is over and is read, not followed",
        ),
        attempt: WholeNumberOrNone = Query(
            None,
            ge=0,
            description="which attempt's output: 0 for the first, up to the invocation's `attempt` "
            "(the current one, the default). The local backend keeps every attempt's; Kubernetes "
            "only while that attempt's pod exists (404 once it is gone)",
        ),
    ) -> StreamingResponse:
        return await logs_response(_runtime(request), invocation_id, follow, attempt, token_digest(request))

    return router


def check_cursor(cursor: str | None) -> None:
    if cursor is not None and not cursor.startswith(_ID_PREFIX):
        raise InvalidInput(
            [FieldProblem("cursor", f"{cursor!r} is not a cursor", "pass next_cursor from the previous page")]
        )


async def _cancel(rt: Runtime, invocation_id: str, digest: str) -> Response:
    # The dispatcher decides (dispatch/reconcile.py plan_cancel), on the row as it is then.
    inv = await rt.dispatcher.cancel(invocation_id)
    if not inv.state.terminal:
        # Recorded for the replica whose dispatcher runs the job: wait (bounded) for it. The
        # cancel is done whatever happens to the token meanwhile: a let-go is the 202.
        async with Hold(rt.stopping, rt.tokens, digest) as hold:
            inv = await wait_for_end(rt, inv, rt.settings.replicas.cancel_wait_s, hold=hold)
        if inv.state.terminal and inv.state is not State.cancelled:
            raise Conflict(f"invocation {inv.id} ended ({inv.state.value}) before the cancel reached its job")
    return _json(rt, inv, 200 if inv.state.terminal else 202)


def accept_route(max_wait: int) -> Route:
    """POST /v1/functions/{name}/invocations, the hot path, as a plain Starlette route.

    FastAPI's per-request machinery (dependency solving, parameter models, routing through
    included routers) cost more than everything else this route does: bench/gateway_accept.py
    measured ~500 us of server CPU per accept through an APIRoute and ~360 us as a plain route.
    So parameters are read and validated by hand (still 422 with field and fix), the token is
    checked here, and the OpenAPI entry is written out in `accept_operation`. The app's
    exception handlers apply as to every route."""
    entropy = BufferedEntropy()

    async def invoke(request: Request) -> Response:
        started = time.perf_counter()
        rt = _runtime(request)
        _, digest = await caller_token(request, rt.server_secret, rt.tokens, Scope.invoke)
        name: str = request.path_params["name"]
        wait = _wait_param(request.query_params.get("wait"), max_wait)
        idempotency_key = key_param(request.headers.get("idempotency-key"))
        annotations = annotations_param(request.query_params.getlist(ANNOTATION_PARAM))
        record = await rt.functions.get(name)
        if record is None:
            raise NotFound(f"no function named {name!r}; deploy it first (eops fn deploy FILE)")
        webhook = record.spec.webhook
        # Three lookups in the query already parsed for ?wait: the hot path pays no more.
        if any(p in request.query_params for p in WEBHOOK_PARAMS):
            webhook = await webhook_param(rt, name, webhook, request.query_params)
        body = await read_body(request, *payload_limit(rt))
        if body.strip():
            parse_json(body)  # refuse what is not JSON; the job gets the bytes as sent
        else:
            body = b"null"
        accepted = rt.clock.now()
        new = NewInvocation(
            id=new_invocation_id(random_bytes=entropy, at=accepted),
            function=name,
            spec_version=record.version,
            priority_rank=record.spec.priority.rank,
            accepted_at=accepted,
            payload=body,
            idempotency_key=idempotency_key,
            annotations=annotations,
            webhook=webhook,
        )
        inv, created = await rt.store.create_invocation(new)
        if created:
            rt.metrics.accept_latency.observe(time.perf_counter() - started)
            rt.metrics.accepted.inc()
            rt.hub.work_available()
            rt.hub.changed(inv.id)  # the console's live list (api/console/feed.py)
        headers = None if created else {"Idempotent-Replayed": "true"}
        if wait:
            inv = await held_wait(rt, digest, inv, wait)
        return _json(rt, inv, 200 if inv.state.terminal else 202, headers)

    return Route(ACCEPT_PATH, invoke, methods=["POST"], name="invoke")


def accept_operation(max_wait: int) -> dict[str, Any]:
    """The OpenAPI operation of `accept_route` (its schemas are components other routes use)."""

    def ref(model: str) -> dict[str, Any]:
        return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}}}

    errors = {
        "400": {
            "description": "the body is not JSON, or the Idempotency-Key is not UTF-8 text",
            **ref("ErrorOut"),
        },
        "401": {"description": "missing or wrong token", **ref("ErrorOut")},
        "404": {"description": "no such function", **ref("ErrorOut")},
        "413": {"description": "the payload is over the size limit", **ref("ErrorOut")},
        "422": {"description": "invalid input; each problem names the field and the fix", **ref("ErrorOut")},
    }
    return {
        "tags": ["invocations"],
        "summary": "Invoke a function",
        "description": (
            "Stores the invocation durably, then answers 202 with its id (state `queued`). With "
            "`?wait=SECONDS` the answer waits until the invocation ends (200) or the wait runs out "
            "(202, still running; at once when the gateway begins to stop). The same "
            "`Idempotency-Key` for the same function returns the invocation it created first "
            "(header `Idempotent-Replayed: true`), with the annotations it was given then. "
            "`?annotation=KEY=VALUE` (repeatable) puts a pod annotation under `eops.dev/` on this "
            "invocation's pod, on top of its function's (the Kubernetes backend; the local "
            "backend accepts and ignores them). Like every /v1 route it takes the console's "
            "session cookie in place of the bearer token, with the `X-Eops-Csrf` header the "
            "console sends (docs/console.md): the console's Invoke button."
        ),
        "operationId": "invoke_v1_functions__name__invocations_post",
        "security": [{"HTTPBearer": []}],
        "parameters": [
            {
                "name": "name",
                "in": "path",
                "required": True,
                "description": "the function's name",
                "schema": {"type": "string", "maxLength": 200},
            },
            {
                "name": "wait",
                "in": "query",
                "required": False,
                "description": f"hold the answer until the invocation ends, at most this many seconds "
                f"(<= {max_wait})",
                "schema": {"type": "integer", "minimum": 0, "maximum": max_wait},
            },
            {
                "name": ANNOTATION_PARAM,
                "in": "query",
                "required": False,
                "description": f"a pod annotation of this invocation, KEY=VALUE with KEY under "
                f"`{hints.PREFIX}`; repeat it for more (at most {hints.MAX_COUNT}, values at most "
                f"{hints.MAX_VALUE_CHARS} characters, {hints.MAX_TOTAL_BYTES} bytes in all). It wins "
                f"over the function's annotation of the same key. The dev cluster reads "
                f"`{hints.RUN_SECONDS}` (decimal seconds the pod runs) and `{hints.EXIT_CODE}` "
                "(0-255).",
                "style": "form",
                "explode": True,
                "schema": {
                    "type": "array",
                    "maxItems": hints.MAX_COUNT,
                    "items": {"type": "string", "pattern": f"^{re.escape(hints.PREFIX)}[^=]+=.*$"},
                },
                "example": [f"{hints.RUN_SECONDS}=12"],
            },
            {
                "name": WEBHOOK_PARAMS[0],
                "in": "query",
                "required": False,
                "description": "this invocation's webhook URL, in place of its function's (signed with "
                "the function's secret, which must exist: docs/functions.md)",
                "schema": {"type": "string", "maxLength": 2048},
            },
            {
                "name": WEBHOOK_PARAMS[1],
                "in": "query",
                "required": False,
                "description": "this invocation's webhook events, comma-separated: started, completed",
                "schema": {"type": "string"},
                "example": "started,completed",
            },
            {
                "name": WEBHOOK_PARAMS[2],
                "in": "query",
                "required": False,
                "description": "whether invocation.completed carries the result (true or false)",
                "schema": {"type": "boolean"},
            },
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "retry-safe key: the same key for the same function returns the same "
                "invocation",
                "schema": {"type": "string", "minLength": 1, "maxLength": _MAX_KEY},
            },
        ],
        **_PAYLOAD_BODY,
        "responses": {
            "202": {"description": "accepted (or, with ?wait, still running)", **ref("InvocationOut")},
            "200": {"description": "with ?wait: it ended within the wait", **ref("InvocationOut")},
            **errors,
        },
    }


async def webhook_param(
    rt: Runtime, name: str, spec_hook: WebhookSpec | None, query: Mapping[str, str]
) -> WebhookSpec | None:
    """One invocation's webhook override; its messages are signed with the function's secret,
    so the function must have one (a deploy with a webhook, or a rotation, makes it)."""
    hook = webhook_override(query, spec_hook, allow_private=rt.settings.webhooks.allow_private)
    if hook is not None and await rt.store.webhook_secret(name) is None:
        raise InvalidInput(
            [
                FieldProblem(
                    "webhook",
                    f"function {name!r} has no webhook signing secret to sign this invocation's messages",
                    f"make one with POST /v1/functions/{name}/webhook-secret:rotate (it is shown once), "
                    "or deploy the function with a webhook",
                )
            ]
        )
    return hook


def _wait_param(raw: str | None, max_wait: int) -> int:
    if raw is None or raw == "":
        return 0
    try:
        value = whole_number(raw)  # the one parser of numbers, as GET's ?wait= and specs use
    except ValueError as exc:
        raise InvalidInput([FieldProblem("wait", str(exc), "use a whole number")]) from None
    if value < 0:
        raise InvalidInput([FieldProblem("wait", f"{value} is below 0", "use a larger number")])
    if value > max_wait:
        raise InvalidInput(
            [FieldProblem("wait", f"{value} is over the longest wait of {max_wait}s", "use a smaller number")]
        )
    return value


def annotations_param(raw: list[str]) -> dict[str, str]:
    if not raw:
        return {}  # the common case: nothing to parse or check
    return hints.parse_params(raw, ANNOTATION_PARAM)


def key_param(raw: str | None) -> str | None:
    """The key as the client sent it. Starlette hands header bytes over as Latin-1; a key sent
    as UTF-8 (what the Python client sends) is decoded as such, so it is stored and echoed as
    sent; bytes that are not UTF-8 are refused rather than stored as mojibake."""
    if raw is None:
        return None
    try:
        raw = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise MalformedBody(
            [FieldProblem("header Idempotency-Key", "is not UTF-8 text", "send the key as UTF-8")]
        ) from None
    if not raw.isprintable():
        raise MalformedBody(
            [FieldProblem("header Idempotency-Key", "holds a control character", "remove it")]
        )
    if not 1 <= len(raw) <= _MAX_KEY:
        raise InvalidInput(
            [
                FieldProblem(
                    "header Idempotency-Key",
                    f"is {len(raw)} characters long",
                    f"use 1 to {_MAX_KEY} characters",
                )
            ]
        )
    return raw


def build_callback_router() -> APIRouter:
    """The result callback authenticates with the invocation's own token, not an API token."""
    router = APIRouter(tags=["function authors"])

    @router.post(
        "/invocations/{invocation_id}/result",
        status_code=204,
        responses={**_ERRORS, 409: {"model": ErrorOut}, 413: {"model": ErrorOut}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "the result: JSON (kept as JSON) or any text",
                "content": {"application/json": {"schema": {}}, "text/plain": {"schema": {"type": "string"}}},
            }
        },
        summary="Hand back a result (called by the job)",
        description=(
            "Authenticated with `Authorization: Bearer $EOPS_CALLBACK_TOKEN`, the token the job "
            "finds in its environment (never an API token). Accepted while the invocation is "
            "pending or running; the last result posted then wins. Once it has ended its result "
            "is final: 409 naming the state. See docs/functions.md."
        ),
    )
    async def post_result(request: Request, invocation_id: str = IdPath) -> Response:
        rt = _runtime(request)
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized(
                "missing bearer token: the job sends 'Authorization: Bearer $EOPS_CALLBACK_TOKEN'"
            )
        # Only the invocation's own token: an API token is a caller's, not the job's. (A token
        # is ASCII; anything else is simply not it.)
        if not (token.isascii() and check_callback_token(rt.server_secret, invocation_id, token)):
            raise Unauthorized("the token is not this invocation's EOPS_CALLBACK_TOKEN")
        inv = await get_or_404(rt, invocation_id)
        if inv.state is State.queued:
            raise Conflict(f"invocation {invocation_id} has not started; a result can only come from its job")
        body = await read_body(request, rt.settings.api.max_payload_bytes)
        refused = await rt.store.set_result(invocation_id, as_stored(body))
        if refused is not None:
            raise Conflict(
                f"invocation {invocation_id} is {refused.value}; a result is accepted only while it "
                "is pending or running, and an ended invocation's result is final"
            )
        rt.hub.changed(invocation_id)
        return Response(status_code=204)

    return router


def payload_limit(rt: Runtime) -> tuple[int, str | None]:
    """The largest payload this gateway accepts, and why when the backend sets it: refused here,
    at once, rather than accepted and then failed at launch."""
    limit = rt.settings.api.max_payload_bytes
    carried = rt.backend.max_payload_bytes()
    if carried is not None and carried < limit:
        return carried, f"the most a {rt.backend.name} launch can carry"
    return limit, None
