"""OpenAPI `links` between the gateway's operations: which answer's fields feed which next
call (a deployed function's name to invoke, read and delete it; an accepted invocation's id to
read, cancel and follow it; a created token's id to revoke it). They document the API's flow
and let a links-driven client (schemathesis' state machine, tests/api/test_stateful.py) chain
calls. Written in this one table and added to the generated document by `add_links`."""

from __future__ import annotations

from typing import Any

# operationIds, as FastAPI derives them (and invocations_routes.accept_operation writes one).
PUT_FUNCTION = "put_function_v1_functions__name__put"
GET_FUNCTION = "get_function_v1_functions__name__get"
DELETE_FUNCTION = "delete_function_v1_functions__name__delete"
INVOKE = "invoke_v1_functions__name__invocations_post"
LIST_INVOCATIONS = "list_invocations_v1_invocations_get"
GET_INVOCATION = "get_invocation_v1_invocations__invocation_id__get"
CANCEL = "cancel_v1_invocations__invocation_id__cancel_post"
LOGS = "logs_v1_invocations__invocation_id__logs_get"
CREATE_TOKEN = "create_token_v1_tokens_post"
REVOKE_TOKEN = "revoke_token_v1_tokens__token_id__delete"

_FUNCTION_NAME = {"name": "$request.path.name"}
_INVOCATION_ID = {"invocation_id": "$response.body#/id"}
_TO_FUNCTION = {
    "GetFunction": (GET_FUNCTION, _FUNCTION_NAME, "read the function"),
    "InvokeFunction": (INVOKE, _FUNCTION_NAME, "invoke the function"),
    "DeleteFunction": (DELETE_FUNCTION, _FUNCTION_NAME, "delete the function"),
    "ListItsInvocations": (LIST_INVOCATIONS, {"function": "$request.path.name"}, "list its invocations"),
}
_TO_INVOCATION = {
    "GetInvocation": (GET_INVOCATION, _INVOCATION_ID, "read the invocation"),
    "CancelInvocation": (CANCEL, _INVOCATION_ID, "cancel the invocation"),
    "InvocationLogs": (LOGS, _INVOCATION_ID, "read the invocation's output"),
}

# (operationId, response status) -> link name -> (target operationId, parameters, description)
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict[str, str], str]]] = {
    (PUT_FUNCTION, "200"): _TO_FUNCTION,
    (PUT_FUNCTION, "201"): _TO_FUNCTION,
    (GET_FUNCTION, "200"): {k: v for k, v in _TO_FUNCTION.items() if k != "GetFunction"},
    (INVOKE, "202"): _TO_INVOCATION,
    (INVOKE, "200"): _TO_INVOCATION,
    (GET_INVOCATION, "200"): {k: v for k, v in _TO_INVOCATION.items() if k != "GetInvocation"},
    (CANCEL, "200"): {"GetInvocation": _TO_INVOCATION["GetInvocation"]},
    (CREATE_TOKEN, "201"): {
        "RevokeToken": (REVOKE_TOKEN, {"token_id": "$response.body#/id"}, "revoke the token")
    },
}


def add_links(schema: dict[str, Any]) -> dict[str, Any]:
    """Add LINKS to the responses of `schema` (an OpenAPI document), in place. Raises
    LookupError when a link names an operation or response the document does not have, so a
    renamed route fails at the first /openapi.json (and in tests) instead of losing its links."""
    operations: dict[str, dict[str, Any]] = {}
    for path_item in schema["paths"].values():
        for operation in path_item.values():
            if isinstance(operation, dict) and "operationId" in operation:
                operations[operation["operationId"]] = operation
    for (source, status), links in LINKS.items():
        if source not in operations:
            raise LookupError(f"OpenAPI link source {source!r} is no operation of the document")
        response = operations[source]["responses"].get(status)
        if response is None:
            raise LookupError(f"operation {source!r} documents no {status} response to link from")
        out = response.setdefault("links", {})
        for link_name, (target, parameters, description) in links.items():
            if target not in operations:
                raise LookupError(f"OpenAPI link {link_name!r} targets unknown operation {target!r}")
            out[link_name] = {
                "operationId": target,
                "parameters": dict(parameters),
                "description": description,
            }
    return schema
