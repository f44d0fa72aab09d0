"""Python client of the ElasticityOps HTTP API (the `eops` CLI is built on it).

    from elasticityops.client import Client
    with Client() as eops:                       # EOPS_URL, EOPS_TOKEN from the environment
        eops.deploy_function("examples/hello.yaml")  # its paths: from examples/ (workdir)
        inv = eops.invoke("hello", {"name": "Ada"}, wait=30)
        print(inv.state, inv.result)                 # inv.wait_expired: 30 s were not enough
        print(eops.map("hello", [{"name": "Ada"}, {"name": "Grace"}]))  # results, in input order

Each call is built once as a plain `Call` (calls.py: pure, no I/O: method, path, body and how
its answer is read), and each client method is written once as a plan of Calls and pauses
(plans.py: retries, long polls, deadlines; time only through a clock). The sync `Client` and
the `AsyncClient` are thin senders that run those plans over httpx, so both have the same
methods with the same parameters and answers. Errors form a small tree of their own
(errors.py): `ApiError` (the server answered with an error), `ConnectionFailed` (no answer at
all) and `InvalidSpec` (a function file that fails validation before any request is made),
all under `ClientError`. httpx exceptions never leak.
"""

from elasticityops.client.aio import AsyncBatch, AsyncClient
from elasticityops.client.calls import (
    DEFAULT_URL,
    TOKEN_ENV,
    Call,
    Requests,
    RetryPolicy,
    WaitPolicy,
    spec_from,
)
from elasticityops.client.errors import (
    URL_ENV,
    ApiError,
    ClientError,
    ConnectionFailed,
    InvalidArgument,
    InvalidSpec,
    InvocationFailed,
)
from elasticityops.client.plans import Operations, WaitedInvocation
from elasticityops.client.sync import Batch, BlockingClock, BlockingSystemClock, Client

__all__ = [
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
    "ApiError",
    "AsyncBatch",
    "AsyncClient",
    "Batch",
    "BlockingClock",
    "BlockingSystemClock",
    "Call",
    "Client",
    "ClientError",
    "ConnectionFailed",
    "InvalidArgument",
    "InvalidSpec",
    "InvocationFailed",
    "Operations",
    "Requests",
    "RetryPolicy",
    "WaitPolicy",
    "WaitedInvocation",
    "spec_from",
]
