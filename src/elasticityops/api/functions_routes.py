"""/v1/functions: register, read and delete functions."""

from __future__ import annotations

from fastapi import APIRouter, Path, Query, Request, Response

from elasticityops.api.body import parse_json_or_yaml, read_body
from elasticityops.api.runtime import Runtime
from elasticityops.api.webhook_params import check_url, fresh_secret
from elasticityops.domain.errors import Conflict, NotFound
from elasticityops.domain.functions import FunctionSpec, parse_function_spec
from elasticityops.domain.invocations import FailureReason, State
from elasticityops.domain.ports import Change, SpecChange
from elasticityops.domain.tokens import ApiToken, Scope
from elasticityops.wire import ErrorOut, FunctionDeployed, FunctionList, FunctionOut

router = APIRouter(tags=["functions"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "missing or wrong token"},
    422: {"model": ErrorOut, "description": "invalid input; each problem names the field and the fix"},
}
_SPEC_SCHEMA = FunctionSpec.model_json_schema(ref_template="#/components/schemas/{model}")
_SPEC_BODY = {
    "requestBody": {
        "required": True,
        "description": "the function spec as JSON, or YAML with Content-Type: application/yaml",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/FunctionSpec"}},
            "application/yaml": {"schema": {"$ref": "#/components/schemas/FunctionSpec"}},
        },
    }
}
NamePath = Path(description="the function's name (DNS-1123 label)", max_length=200)


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@router.put(
    "/functions/{name}",
    response_model=FunctionDeployed,
    responses={
        **_ERRORS,
        200: {"model": FunctionDeployed, "description": "replaced (`changed`), or the same spec again"},
        201: {"model": FunctionDeployed, "description": "created"},
        400: {"model": ErrorOut},
    },
    openapi_extra=_SPEC_BODY,
    summary="Create or replace a function",
    description="A spec that differs from the current one (as stored: defaults filled in) is its "
    "next version; the same spec again changes nothing and keeps its version (`changed: false`).",
)
async def put_function(request: Request, response: Response, name: str = NamePath) -> FunctionDeployed:
    rt = _runtime(request)
    body = await read_body(request, rt.settings.api.max_payload_bytes)
    data = parse_json_or_yaml(body, request.headers.get("content-type", ""))
    spec = parse_function_spec(data, name=name)
    url = None if spec.webhook is None else spec.webhook.url
    if url is not None:
        check_url(url, "webhook.url", allow_private=rt.settings.webhooks.allow_private)
    record, outcome = await rt.store.put_function(spec, rt.clock.now())
    rt.functions.forget(name)
    rt.hub.work_available()  # a new version may change what can be admitted
    # After the spec is stored: a deploy that fails between the two stored the spec, and its
    # retry (the same URL, not yet the secret's) issues the secret then.
    secret = await rt.store.issue_webhook_secret(name, url, fresh_secret(), rt.clock.now())
    response.status_code = 201 if outcome is SpecChange.created else 200
    return FunctionDeployed(
        **dict(FunctionOut.of(record)), changed=outcome is not SpecChange.unchanged, webhook_secret=secret
    )


@router.get("/functions", response_model=FunctionList, responses=_ERRORS, summary="List functions")
async def list_functions(request: Request) -> FunctionList:
    records = await _runtime(request).store.list_functions()
    return FunctionList(items=[FunctionOut.of(r, show_env=_reads_env(request)) for r in records])


@router.get(
    "/functions/{name}",
    response_model=FunctionOut,
    responses={**_ERRORS, 404: {"model": ErrorOut}},
    summary="Read a function",
)
async def get_function(request: Request, name: str = NamePath) -> FunctionOut:
    record = await _runtime(request).store.get_function(name)
    if record is None:
        raise NotFound(f"no function named {name!r}; list them with GET /v1/functions (eops fn ls)")
    return FunctionOut.of(record, show_env=_reads_env(request))


def _reads_env(request: Request) -> bool:
    """A function's env is where its credentials go: only an admin token reads its values (an
    invoke token may invoke the function, not learn its secrets)."""
    token: ApiToken = request.state.api_token
    return token.scope.allows(Scope.admin)


@router.delete(
    "/functions/{name}",
    status_code=204,
    responses={**_ERRORS, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
    summary="Delete a function",
    description=(
        "Refused with 409 while the function has queued, pending or running invocations, unless "
        "`force=true`: then its queued invocations fail with reason `function_deleted` and its "
        "pending or running ones are cancelled. Finished invocations stay readable."
    ),
)
async def delete_function(
    request: Request,
    name: str = NamePath,
    force: bool = Query(False, description="fail queued and cancel active invocations of it"),
) -> Response:
    rt = _runtime(request)
    if await rt.store.get_function(name) is None:
        raise NotFound(f"no function named {name!r}; list them with GET /v1/functions (eops fn ls)")
    if not force:
        busy = []
        for state in (State.queued, State.pending, State.running):
            page = await rt.store.list_invocations(function=name, state=state, limit=1, cursor=None)
            if page.items:
                busy.append(state.value)
        if busy:
            raise Conflict(
                f"function {name!r} has {' and '.join(busy)} invocations; wait for them, cancel them, "
                "or delete with ?force=true (eops fn rm --force), which fails the queued ones "
                "and cancels the rest"
            )
    await rt.store.delete_function(name, rt.clock.now())
    rt.functions.forget(name)
    # The name deployed again with a webhook, even the same URL, gets a secret of its own (the
    # old one stays for the messages still waiting).
    await rt.store.issue_webhook_secret(name, None, fresh_secret(), rt.clock.now())
    if force:
        await _fail_queued(rt, name)
        for state in (State.pending, State.running):
            await _cancel_all(rt, name, state)
    return Response(status_code=204)


async def _fail_queued(rt: Runtime, name: str) -> None:
    cursor: str | None = None
    while True:
        page = await rt.store.list_invocations(function=name, state=State.queued, limit=200, cursor=cursor)
        for inv in page.items:
            change = Change(
                id=inv.id,
                to=State.failed,
                at=rt.clock.now(),
                from_states=frozenset({State.queued}),
                reason=FailureReason.function_deleted,
                message=f"function {name!r} was deleted before this invocation started",
            )
            if await rt.store.apply(change) is not None:
                rt.hub.changed(inv.id)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


async def _cancel_all(rt: Runtime, name: str, state: State) -> None:
    cursor: str | None = None
    while True:
        page = await rt.store.list_invocations(function=name, state=state, limit=200, cursor=cursor)
        for inv in page.items:
            await rt.dispatcher.cancel(inv.id)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
