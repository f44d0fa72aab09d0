"""API tokens: ids, scopes, expiry and revocation, through the API (/v1/tokens) and the CLI
(`eops token create|ls|revoke` on the data dir), against a real gateway."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from cli.runner import Eops, Result
from elasticityops.api.auth import CACHE_SECONDS, INVOKE_ROUTES, needed_scope
from elasticityops.client import Client
from elasticityops.domain.tokens import Scope
from elasticityops.wire import WEBHOOK_PATH_HIDDEN
from helpers.server import RunningServer

HELLO = {"name": "tokhello", "command": ["python", "-c", "print('hi')"], "timeout_seconds": 30}


def _create(gateway: RunningServer, **body: Any) -> dict[str, Any]:
    with gateway.client() as admin:
        answer = admin.post("/v1/tokens", json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def _cli(gateway: RunningServer, *args: str, in_process: bool = True) -> Result:
    """`eops token ARGS --data-dir` on the gateway's data dir; in this process unless told
    (tests/cli/runner.py): test_the_cli_creates_lists_and_revokes_tokens runs each on a real
    process, as a user does."""
    eops = Eops(None, in_process=in_process)
    return eops("token", *args, "--data-dir", str(gateway.data_dir), timeout=60)


def test_a_created_token_has_an_id_a_scope_and_is_shown_once(gateway: RunningServer) -> None:
    created = _create(gateway, name="ci", scope="invoke")
    assert created["id"].startswith("tok-")
    assert created["scope"] == "invoke"
    assert created["expires_at"] is None
    assert created["token"].startswith("eops_")
    with gateway.client() as admin:
        listed = admin.get("/v1/tokens").json()["items"]
    mine = [t for t in listed if t["id"] == created["id"]]
    assert mine == [{k: v for k, v in created.items() if k != "token"}], "listings never hold the token"
    assert all("token" not in t for t in listed)


def test_names_need_not_be_unique_ids_are(gateway: RunningServer) -> None:
    ids = {_create(gateway, name="same")["id"] for _ in range(3)}
    assert len(ids) == 3


def test_the_admin_token_made_at_first_start_has_scope_admin(gateway: RunningServer) -> None:
    with gateway.client() as admin:
        listed = admin.get("/v1/tokens").json()["items"]
    first = [t for t in listed if t["name"] == "admin"]
    assert [t["scope"] for t in first] == ["admin"]


def test_an_invoke_token_invokes_reads_and_cancels_but_never_deploys(gateway: RunningServer) -> None:
    with gateway.client() as admin:
        assert admin.put("/v1/functions/tokhello", json=HELLO).status_code in (200, 201)
    token = _create(gateway, name="invoker", scope="invoke")["token"]
    with gateway.client(token) as invoker:
        accepted = invoker.post("/v1/functions/tokhello/invocations", json={})
        assert accepted.status_code == 202, accepted.text
        inv = accepted.json()["id"]
        assert invoker.get(f"/v1/invocations/{inv}").status_code == 200
        assert invoker.get("/v1/invocations").status_code == 200
        assert invoker.get("/v1/functions").status_code == 200
        assert invoker.get("/v1/functions/tokhello").status_code == 200
        assert invoker.post(f"/v1/invocations/{inv}/cancel").status_code in (200, 409)
        for method, path, body in [
            ("PUT", "/v1/functions/tokhello", HELLO),
            ("PUT", "/v1/functions/newone", {**HELLO, "name": "newone"}),
            ("DELETE", "/v1/functions/tokhello", None),
            ("GET", "/v1/tokens", None),
            ("POST", "/v1/tokens", {"name": "escalate", "scope": "admin"}),
            ("DELETE", "/v1/tokens/tok-000000000000", None),
        ]:
            answer = invoker.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "forbidden"
            assert "scope admin" in answer.json()["error"]["message"]


def test_an_admin_token_may_deploy(gateway: RunningServer) -> None:
    token = _create(gateway, name="deployer", scope="admin")["token"]
    with gateway.client(token) as deployer:
        assert deployer.put("/v1/functions/tokhello", json=HELLO).status_code in (200, 201)
        assert deployer.get("/v1/tokens").status_code == 200


def test_revocation_through_the_api_takes_effect_at_once(gateway: RunningServer) -> None:
    created = _create(gateway, name="short-lived", scope="invoke")
    with gateway.client(created["token"]) as client:
        assert client.get("/v1/functions").status_code == 200  # now in the checker's cache
        with gateway.client() as admin:
            assert admin.delete(f"/v1/tokens/{created['id']}").status_code == 204
            assert admin.delete(f"/v1/tokens/{created['id']}").status_code == 404
        answer = client.get("/v1/functions")
        assert answer.status_code == 401, "the revoked token was still trusted"
        assert client.post("/v1/functions/tokhello/invocations", json={}).status_code == 401


def test_an_expired_token_stops_working_even_when_cached(gateway: RunningServer) -> None:
    created = _create(gateway, name="brief", scope="invoke", expires_in_seconds=2)
    assert created["expires_at"] is not None
    with gateway.client(created["token"]) as client:
        assert client.get("/v1/functions").status_code == 200
        time.sleep(2.2)
        assert client.get("/v1/functions").status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "scope": "root"},
        {"name": "x", "expires_in_seconds": 0},
        {"name": "x", "expires_in_seconds": 10**12},
        {"name": ""},
        {"name": "x", "extra": 1},
        {"name": "x", "expires_in_seconds": True},  # was a lifetime of 1 s
        {"name": "x", "expires_in_seconds": "10"},  # was 10 s
        {"name": "x", "expires_in_seconds": 10.0},
        {"name": 7},
    ],
)
def test_bad_token_requests_are_422(gateway: RunningServer, body: dict[str, Any]) -> None:
    with gateway.client() as admin:
        assert admin.post("/v1/tokens", json=body).status_code == 422


@pytest.mark.parametrize("name", ["evil\x1b[2J", "two\nlines", "tok-0123\u202eniamda", "tab\there"])
def test_a_name_that_cannot_be_shown_is_refused_naming_the_character(
    gateway: RunningServer, name: str
) -> None:
    with gateway.client() as admin:
        answer = admin.post("/v1/tokens", json={"name": name})
    assert answer.status_code == 422, answer.text
    [problem] = answer.json()["error"]["problems"]
    assert problem["field"] == "name"
    assert "cannot be shown" in problem["problem"]
    done = _cli(gateway, "create", "--name", name)
    assert done.code == 2, done.stderr
    assert "cannot be shown" in done.stderr
    assert "Traceback" not in done.stderr


def test_token_ls_escapes_a_name_stored_before_names_were_checked(gateway: RunningServer) -> None:
    import asyncio
    from datetime import UTC, datetime

    from elasticityops.store.sql import SqlStore

    async def older_row() -> None:
        store = await SqlStore.open(f"sqlite:///{gateway.data_dir / 'eops.db'}")
        try:
            await store.create_api_token("old\x1b[31mred\nFAKE ROW", "0" * 64, datetime.now(UTC))
        finally:
            await store.close()

    asyncio.run(older_row())
    listed = _cli(gateway, "ls")
    assert listed.code == 0, listed.stderr
    assert "\x1b" not in listed.stdout
    assert "old\\x1b[31mred\\nFAKE ROW" in listed.stdout
    assert not any(line.startswith("FAKE ROW") for line in listed.stdout.splitlines())


def test_the_cli_creates_lists_and_revokes_tokens(gateway: RunningServer) -> None:
    def cli(*args: str) -> Result:
        return _cli(gateway, *args, in_process=False)

    done = cli("create", "--name", "from-cli", "--scope", "invoke", "--expires-in", "30d")
    assert done.code == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("eops_")
    assert "\n" not in token
    token_id = done.stderr.split()[1]
    assert token_id.startswith("tok-"), done.stderr
    assert "scope invoke" in done.stderr
    assert "shown once" in done.stderr

    listed = cli("ls", "--json")
    assert listed.code == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert rows[token_id]["name"] == "from-cli"
    assert rows[token_id]["scope"] == "invoke"
    assert rows[token_id]["expires_at"] is not None
    assert any(row["name"] == "admin" and row["scope"] == "admin" for row in rows.values())
    table = cli("ls")
    assert token_id in table.stdout
    assert "from-cli" in table.stdout
    assert token not in table.stdout

    with gateway.client(token) as client:
        assert client.get("/v1/functions").status_code == 200  # cached by the gateway now
        revoked = cli("revoke", token_id)
        assert revoked.code == 0, revoked.stderr
        # Another process revoked it: this gateway notices within its cache's lifetime.
        deadline = time.monotonic() + CACHE_SECONDS + 5
        while client.get("/v1/functions").status_code == 200:
            assert time.monotonic() < deadline, "a token revoked by the CLI was still trusted"
            time.sleep(0.2)
        assert client.get("/v1/functions").status_code == 401
    again = cli("revoke", token_id)
    assert again.code == 1
    assert "no token" in again.stderr


@pytest.mark.parametrize("bad", ["30", "thirty days", "0d", "5y", "\uff11d"])
def test_the_cli_refuses_a_bad_expiry(gateway: RunningServer, bad: str) -> None:
    done = _cli(gateway, "create", "--expires-in", bad)
    assert done.code == 2
    assert "--expires-in" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_cli_default_scope_is_invoke(gateway: RunningServer) -> None:
    done = _cli(gateway, "create")
    assert done.code == 0, done.stderr
    with gateway.client(done.stdout.strip()) as client:
        assert client.get("/v1/functions").status_code == 200
        assert client.put("/v1/functions/tokhello", json=HELLO).status_code == 403


def test_every_v1_route_has_a_decided_scope(gateway: RunningServer) -> None:
    """Every operation of the OpenAPI document, tried with an invoke token: exactly the admin
    ones answer 403. A route added later is admin-only until auth.INVOKE_ROUTES names it."""
    token = _create(gateway, name="prober", scope="invoke")["token"]
    paths = httpx.get(gateway.url + "/openapi.json").json()["paths"]
    forbidden = set()
    with gateway.client(token) as invoker:
        for path, operations in paths.items():
            if not path.startswith("/v1") or path.endswith("/result"):  # the job's own token
                continue
            for method in operations:
                concrete = (
                    path.replace("{name}", "nosuchfn")
                    .replace("{invocation_id}", "inv-0000000000000000000000000")
                    .replace("{token_id}", "tok-000000000000")
                    .replace("{batch_id}", "bat-0000000000000000000000000")
                )
                # The event stream never ends by itself: its status is the answer.
                with invoker.stream(method.upper(), concrete, params={"wait": 0}, json={}) as answer:
                    if path != "/v1/events":
                        answer.read()
                assert answer.status_code < 500, (method, path, answer.text if path != "/v1/events" else "")
                if answer.status_code == 403:
                    forbidden.add((method.upper(), path))
    assert forbidden == {
        ("PUT", "/v1/functions/{name}"),
        ("DELETE", "/v1/functions/{name}"),
        ("GET", "/v1/tokens"),
        ("POST", "/v1/tokens"),
        ("DELETE", "/v1/tokens/{token_id}"),
        ("GET", "/v1/headroom"),  # an operator's view, not a caller's
        ("GET", "/v1/cost"),  # the cost report: an operator's view too
        ("POST", "/v1/functions/{name}/webhook-secret:rotate"),  # a secret, shown once
    }
    assert len(INVOKE_ROUTES) == 14
    assert needed_scope("GET", "some_new_route") is Scope.admin


def test_a_status_of_403_names_the_token(gateway: RunningServer) -> None:
    created = _create(gateway, name="named", scope="invoke")
    answer = httpx.get(gateway.url + "/v1/tokens", headers={"Authorization": f"Bearer {created['token']}"})
    assert answer.status_code == 403
    assert created["id"] in answer.json()["error"]["message"]


def test_a_functions_env_values_are_read_by_admin_tokens_only(gateway: RunningServer) -> None:
    # issue 37: env is the documented place for credentials, and an invoke token read them.
    name = "envfn-" + uuid.uuid4().hex[:8]
    says = (
        "import json, os; open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps(os.environ['API_KEY']))"
    )
    spec = {"command": ["python", "-c", says], "env": {"API_KEY": "s3cret-value", "MODE": "fast"}}
    with gateway.client() as admin:
        assert admin.put(f"/v1/functions/{name}", json=spec).status_code == 201
        seen = admin.get(f"/v1/functions/{name}").json()
        assert seen["spec"]["env"] == {"API_KEY": "s3cret-value", "MODE": "fast"}
        assert seen["env_hidden"] is False
    token = _create(gateway, name="reader", scope="invoke")["token"]
    with gateway.client(token, timeout=120) as invoker:
        one = invoker.get(f"/v1/functions/{name}")
        listed = invoker.get("/v1/functions")
        ran = invoker.post(f"/v1/functions/{name}/invocations?wait=60", json={})
    assert one.status_code == 200, one.text
    assert "s3cret-value" not in one.text
    assert "s3cret-value" not in listed.text
    assert set(one.json()["spec"]["env"]) == {"API_KEY", "MODE"}  # which variables: yes; values: no
    assert one.json()["env_hidden"] is True
    [item] = [f for f in listed.json()["items"] if f["spec"]["name"] == name]
    assert item["env_hidden"] is True
    assert ran.json()["result"] == "s3cret-value"  # the job itself still gets it


def test_a_webhooks_url_is_read_by_admin_tokens_only(gateway: RunningServer) -> None:
    # A webhook URL often is its receiver's credential (a token in its path or query).
    name = "hookfn-" + uuid.uuid4().hex[:8]
    url = "https://hooks.example.com/services/T000/B000/s3cret-path?token=s3cret-query"
    with gateway.client() as admin:
        assert (
            admin.put(
                f"/v1/functions/{name}", json={"command": ["true"], "webhook": {"url": url}}
            ).status_code
            == 201
        )
        seen = admin.get(f"/v1/functions/{name}").json()
        assert seen["spec"]["webhook"]["url"] == url
        assert seen["webhook_hidden"] is False
    token = _create(gateway, name="hook-reader", scope="invoke")["token"]
    with gateway.client(token) as invoker:
        one = invoker.get(f"/v1/functions/{name}")
        listed = invoker.get("/v1/functions")
    assert "s3cret" not in one.text
    assert "s3cret" not in listed.text
    assert one.json()["spec"]["webhook"]["url"] == "https://hooks.example.com" + WEBHOOK_PATH_HIDDEN
    assert one.json()["webhook_hidden"] is True
    # Nor through an invocation's deliveries.
    with gateway.client() as admin:
        inv = admin.post(f"/v1/functions/{name}/invocations").json()["id"]
    with gateway.client(token) as invoker:
        deadline = time.monotonic() + 30
        while not (items := invoker.get(f"/v1/invocations/{inv}/webhooks").json()["items"]):
            assert time.monotonic() < deadline, "its end made no webhook message"
            time.sleep(0.1)
    assert items[0]["url"] == "https://hooks.example.com" + WEBHOOK_PATH_HIDDEN
    # What the Python client reads back is still a spec (the URL shown is a valid one).
    with Client(gateway.url, token) as client:
        assert client.get_function(name).webhook_hidden is True
