"""Schemathesis' stateful runs against a live gateway: sequences of calls chained by the
OpenAPI links of /openapi.json (api/openapi_links.py): deploy a function, invoke it, read,
cancel and follow the invocation, delete the function; create and revoke a token. No answer
may be a 5xx or stray from its documented schema."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import hypothesis
import pytest
import schemathesis
from hypothesis.stateful import Bundle, initialize
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.generation.feedback import NO_FEEDBACK
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput
from schemathesis.specs.openapi.checks import response_schema_conformance

from elasticityops.api.app import create_app
from elasticityops.domain.functions import MAX_NAME_LEN, NAME_RE
from elasticityops.settings import Settings
from helpers.server import RunningServer

pytestmark = pytest.mark.slow


def _as_client_would(case: schemathesis.Case[Any]) -> None:
    """A deploy as a client sends it: a name that is a DNS-1123 label (the schema says so only
    in words, so generated ones almost never are), the same name in the body as in the URL, no
    empty argument or NUL in the command. Without it almost no deploy succeeds and no chain
    gets past its first step."""
    if case.method.upper() != "PUT" or case.path != "/v1/functions/{name}" or not case.path_parameters:
        return
    name = str(case.path_parameters.get("name", ""))
    if not (NAME_RE.match(name) and len(name) <= MAX_NAME_LEN):
        name = "fn-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    case.path_parameters["name"] = name
    if isinstance(case.body, dict):
        # Fields the schema leaves as free strings or maps but the gateway checks further (GPU
        # types, quantities, env and annotation names) are dropped: with them nearly every
        # generated deploy is a 422. test_schemathesis.py fuzzes them.
        body = {k: v for k, v in case.body.items() if k not in ("gpu", "resources", "env", "annotations")}
        body = {k: v for k, v in body.items() if not (isinstance(v, str) and "\x00" in v)}
        command = body.get("command")
        if isinstance(command, list):
            parts = cast("list[str]", command)  # the schema's: strings (only valid requests generated)
            body["command"] = [part for part in parts if part and "\x00" not in part] or ["true"]
        body["name"] = name
        case.body = body


def _reset(gateway: RunningServer, kept_tokens: set[str]) -> None:
    """Delete every function (force: failing its queued invocations) and revoke every token
    but `kept_tokens`."""
    with gateway.client() as http:
        for function in http.get("/v1/functions").raise_for_status().json()["items"]:
            name = function["spec"]["name"]
            http.delete(f"/v1/functions/{name}", params={"force": "true"}).raise_for_status()
        for token in http.get("/v1/tokens").raise_for_status().json()["items"]:
            if token["id"] not in kept_tokens:
                http.delete(f"/v1/tokens/{token['id']}").raise_for_status()


def test_every_link_fills_real_parameters_of_its_target() -> None:
    """In process, no server: each link names an operation of the document and only parameters
    that operation has, and every path parameter of it (else schemathesis refuses the link)."""
    document = create_app(Settings(), _no_lifespan).openapi()
    operations = {
        op["operationId"]: op
        for item in document["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    count = 0
    for source in operations.values():
        for response in source["responses"].values():
            for link in response.get("links", {}).values():
                count += 1
                params = {p["name"]: p["in"] for p in operations[link["operationId"]].get("parameters", [])}
                assert set(link["parameters"]) <= set(params), link
                assert {n for n, where in params.items() if where == "path"} <= set(link["parameters"]), link
    assert count >= 20


@asynccontextmanager
async def _no_lifespan(_app: Any) -> AsyncIterator[None]:
    yield


def test_links_name_real_operations(fuzzed_gateway: RunningServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_gateway.url}/openapi.json")
    links = {
        (method, path, status, name)
        for path, item in schema.raw_schema["paths"].items()
        for method, operation in item.items()
        for status, response in operation["responses"].items()
        for name in response.get("links", {})
    }
    assert ("put", "/v1/functions/{name}", "201", "InvokeFunction") in links
    assert ("post", "/v1/functions/{name}/invocations", "202", "CancelInvocation") in links
    assert ("post", "/v1/tokens", "201", "RevokeToken") in links


REQUIRED_OK = {"PUT /v1/functions/{name}", "POST /v1/tokens", "DELETE /v1/tokens/{token_id}"}
FOLLOWED_INVOCATION = {
    "GET /v1/invocations/{invocation_id}",
    "POST /v1/invocations/{invocation_id}/cancel",
    "GET /v1/invocations/{invocation_id}/logs",
}


def test_stateful_runs_get_no_server_error(fuzzed_gateway: RunningServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_gateway.url}/openapi.json")
    # Only the documented links chain calls: no links inferred from similar-looking fields (one
    # from GET /v1/tokens to DELETE /v1/tokens/{id} would revoke the admin token mid-run).
    schema.config.phases.stateful.inference.algorithms = []
    # Valid requests only: negative ones (and steps that drop the auth header) end a chain at
    # its first step; invalid input is what test_schemathesis.py and test_header_fuzz.py send.
    schema.config.generation.modes = [GenerationMode.POSITIVE]
    schema.config.phases.stateful.generation.modes = [GenerationMode.POSITIVE]
    headers = {"Authorization": f"Bearer {fuzzed_gateway.token}"}
    seen: Counter[tuple[str, int]] = Counter()
    scenarios = [0]  # scenarios ended (teardown ran)
    flaky: list[Exception] = []

    deploy = schema["/v1/functions/{name}"]["PUT"]
    with fuzzed_gateway.client() as http:
        kept_tokens = {t["id"] for t in http.get("/v1/tokens").json()["items"]}

    # No feedback from earlier answers into generation (what `as_state_machine` adds): it
    # outlives a scenario, so the same choices would meet other generated values next time.
    machine = schema.build_state_machine(feedback=NO_FEEDBACK, link_calibration=None)

    class Workflow(machine):  # type: ignore[misc,valid-type]
        # Schemathesis starts chains only from POSTs and path-less GETs; a function is created
        # by PUT, so every scenario begins with a deploy, whose answer feeds its links (the
        # state machine routes a step's result to the bundles of its operation's links).
        @initialize(target=Bundle("catch_all"), input=deploy.as_strategy().map(StepInput.initial))
        def deploy_a_function(self, input: StepInput) -> StepOutput | None:
            self.recorder.record_case(case=input.case)
            output: StepOutput | None = self._step(input)
            return output

        def teardown(self) -> None:
            # Each scenario starts from the same gateway state: Hypothesis replays prefixes of
            # scenarios and insists that the same choices meet the same answers (a deploy 201
            # the first time and 200 the next is flaky to it).
            super().teardown()
            scenarios[0] += 1
            _reset(fuzzed_gateway, kept_tokens)

        def before_call(self, case: schemathesis.Case[Any]) -> None:
            _as_client_would(case)

        def get_call_kwargs(self, case: schemathesis.Case[Any]) -> dict[str, Any]:
            return {"headers": headers, "timeout": 30}

        def after_call(self, response: Any, case: schemathesis.Case[Any]) -> None:
            super().after_call(response, case)
            seen[(f"{case.method.upper()} {case.path}", response.status_code)] += 1

        def validate_response(self, response: Any, case: schemathesis.Case[Any], **kwargs: Any) -> None:
            case.validate_response(
                response, checks=[not_a_server_error, response_schema_conformance], transport_kwargs=kwargs
            )

    # Up to 40 scenarios of up to 8 steps, in rounds: Hypothesis stops a round (Flaky) when
    # the gateway answers a replayed choice differently from the first time (an invocation
    # ended within ?wait=1 once and not the next), which schemathesis' own runner takes for
    # the end of a run and starts another. The first round is derandomized; a round after a
    # stop is seeded at random (a derandomized one would replay the same prefix).
    # Which chains go deep varies from run to run (see the assertions below): a run that has
    # its 40 scenarios but has not yet walked every asserted chain gets more rounds, up to 14 (the
    # batch and webhook routes made the walk wider).
    def walked() -> bool:
        ok = {op for op, status in seen if status < 300}
        return bool(
            ok >= REQUIRED_OK
            and ok & {"GET /v1/functions/{name}", "DELETE /v1/functions/{name}"}
            and "POST /v1/functions/{name}/invocations" in ok
            and ok & FOLLOWED_INVOCATION
        )

    rounds = 0
    while (scenarios[0] < 40 or not walked()) and rounds < 14:
        rounds += 1
        _reset(fuzzed_gateway, kept_tokens)  # a stopped round may not have torn down
        settings = hypothesis.settings(
            max_examples=max(40 - scenarios[0], 10),
            stateful_step_count=8,
            phases=[hypothesis.Phase.generate],  # as schemathesis runs them: no shrinking
            deadline=None,
            derandomize=rounds == 1,
            database=None,
            suppress_health_check=list(hypothesis.HealthCheck),
        )
        before = scenarios[0]
        try:
            Workflow.run(settings=settings)
        except hypothesis.errors.Flaky as exc:
            flaky.append(exc)
        if scenarios[0] - before >= settings.max_examples and walked():
            break
    print(f"{scenarios[0]} scenarios in {rounds} rounds; stopped by: {flaky!r}")
    assert scenarios[0] >= 30, f"only {scenarios[0]} scenarios ran in {rounds} rounds: {flaky}"
    print(*sorted(seen.items()), sep="\n")
    assert not [key for key in seen if key[1] >= 500]
    # The chains were walked, not only their first steps. Schemathesis draws some choices with
    # true randomness (whether a step uses its link's values; whether it drops the auth header
    # to see a 401), so which chains go deep varies from run to run (one run of 40 scenarios
    # revoked no token): the loop above runs more rounds until these are walked — a deploy read
    # or deleted through its links, a token revoked through its link, and some invocation
    # accepted and then read, cancelled or followed.
    ok = {op for op, status in seen if status < 300}
    assert ok >= REQUIRED_OK, sorted(seen.items())
    assert ok & {"GET /v1/functions/{name}", "DELETE /v1/functions/{name}"}, sorted(seen.items())
    assert "POST /v1/functions/{name}/invocations" in ok, sorted(seen.items())
    assert ok & FOLLOWED_INVOCATION, sorted(seen.items())
