"""Python client of the ElasticityOps HTTP API (the `eops` CLI is built on it).

    from elasticityops.client import Client
    with Client() as eops:                       # EOPS_URL, EOPS_TOKEN from the environment
        eops.deploy_function("examples/hello/function.yaml")
        inv = eops.invoke("hello", {"name": "Ada"}, wait=30)
        print(inv.state, inv.result)

Each call is first built as a plain `Call` (calls.py: pure, no I/O) and only `send` differs
between the sync `Client` and the `AsyncClient`, so both share request building, retry rules
and error parsing. Errors form a small tree of their own (errors.py): `ApiError` (the server
answered with an error), `ConnectionFailed` (no answer at all) and `InvalidSpec` (a function
file that fails validation before any request is made), all under `ClientError`. httpx
exceptions never leak.
"""

from elasticityops.client.aio import AsyncClient
from elasticityops.client.calls import (
    DEFAULT_URL,
    TOKEN_ENV,
    Call,
    Requests,
    RetryPolicy,
    WaitPolicy,
    spec_from,
)
from elasticityops.client.errors import URL_ENV, ApiError, ClientError, ConnectionFailed, InvalidSpec
from elasticityops.client.sync import Client

__all__ = [
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
    "ApiError",
    "AsyncClient",
    "Call",
    "Client",
    "ClientError",
    "ConnectionFailed",
    "InvalidSpec",
    "Requests",
    "RetryPolicy",
    "WaitPolicy",
    "spec_from",
]
