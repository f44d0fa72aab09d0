"""PostgreSQL restarted under load (issue 16): a request during the outage gets 503 with
Retry-After, none is half-accepted (no 202 without a committed row, no row without an answer
the client can retry with the same Idempotency-Key), and after the restart every accepted
invocation runs to its end exactly once.

A real `eops serve` process (local backend, virtual GPU slots) on a PostgreSQL server of its
own, stopped with `pg_ctl stop -m immediate` (connections cut, no shutdown checkpoint: what a
crash looks like) while clients keep invoking, then started again on the same port."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from helpers.pg_cluster import PgCluster, create_database
from helpers.server import running_server

pytestmark = pytest.mark.slow

REQUESTS = 60
CLIENTS = 4
OUTAGE_S = 4.0
FUNCTION = {"command": ["python", "-c", "import time; time.sleep(0.2)"]}


class Invoker:
    """One client's requests, each retried with its own Idempotency-Key until it gets a 202;
    every answer kept."""

    def __init__(self, client: httpx.Client, keys: list[str]) -> None:
        self.client = client
        self.keys = keys
        self.ids: dict[str, str] = {}
        self.statuses: list[int] = []
        self.unavailable: list[httpx.Response] = []
        self.errors: list[str] = []

    def run(self, deadline: float) -> None:
        for key in self.keys:
            while time.monotonic() < deadline:
                try:
                    answer = self.client.post(
                        "/v1/functions/quick/invocations", json={"k": key}, headers={"Idempotency-Key": key}
                    )
                except httpx.TransportError as exc:  # the gateway must answer, outage or not
                    self.errors.append(f"{key}: {exc!r}")
                    time.sleep(0.2)
                    continue
                self.statuses.append(answer.status_code)
                if answer.status_code == 202:
                    inv_id = answer.json()["id"]
                    if key in self.ids and self.ids[key] != inv_id:
                        self.errors.append(f"{key}: answered {self.ids[key]} then {inv_id}")
                    self.ids[key] = inv_id
                    break
                if answer.status_code == 503:
                    self.unavailable.append(answer)
                    time.sleep(min(float(answer.headers.get("Retry-After", "1")), 1.0))
                    continue
                self.errors.append(f"{key}: {answer.status_code} {answer.text[:300]}")
                break


def test_a_postgres_restart_under_load_loses_and_doubles_nothing(
    own_postgres: PgCluster, tmp_path: Path
) -> None:
    # A server of its own, not the session's: this test stops it.
    env = {
        "EOPS_DATABASE_URL": create_database(own_postgres, "eops_outage"),
        "EOPS_GPUS": "8",
    }
    with running_server(tmp_path / "gw", env=env) as gw:
        with gw.client() as client:
            assert client.put("/v1/functions/quick", json=FUNCTION).status_code == 201
        keys = [f"key-{i:03d}" for i in range(REQUESTS)]
        invokers = [Invoker(gw.client(timeout=20.0), keys[c::CLIENTS]) for c in range(CLIENTS)]
        deadline = time.monotonic() + 120
        threads = [threading.Thread(target=i.run, args=(deadline,), daemon=True) for i in invokers]
        for t in threads:
            t.start()
        # Let some requests through, then cut the database while the others are under way.
        while sum(len(i.ids) for i in invokers) < REQUESTS // 4:
            time.sleep(0.05)
        own_postgres.stop("immediate")
        down_at = time.monotonic()
        # the gateway answers at once while the database is down: 503, with Retry-After
        with gw.client(timeout=10.0) as probe:
            answer = probe.post(
                "/v1/functions/quick/invocations", json={}, headers={"Idempotency-Key": "probe"}
            )
        assert answer.status_code == 503, answer.text
        assert int(answer.headers["Retry-After"]) >= 1
        assert "database" in answer.json()["error"]["message"]
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        own_postgres.start()
        for t in threads:
            t.join(timeout=150)
        for i in invokers:
            i.client.close()

        errors = [e for i in invokers for e in i.errors]
        assert not errors, errors
        ids = {k: v for i in invokers for k, v in i.ids.items()}
        assert sorted(ids) == keys  # every request accepted in the end, one id per key
        assert len(set(ids.values())) == REQUESTS
        assert sum(len(i.unavailable) for i in invokers) > 0  # the outage was seen by clients
        assert all(r.headers.get("Retry-After") for i in invokers for r in i.unavailable)
        # the probe's key was never answered 202: if its row exists, retrying gives that row
        with gw.client() as client:
            again = client.post(
                "/v1/functions/quick/invocations", json={}, headers={"Idempotency-Key": "probe"}
            )
            assert again.status_code == 202
            probe_id = again.json()["id"]
            ended: dict[str, str] = {}
            stop = time.monotonic() + 120
            while len(ended) < REQUESTS + 1 and time.monotonic() < stop:
                for inv_id in [*ids.values(), probe_id]:
                    if inv_id not in ended:
                        state = client.get(f"/v1/invocations/{inv_id}").json()["state"]
                        if state in ("succeeded", "failed", "cancelled", "timed_out"):
                            ended[inv_id] = state
                time.sleep(0.3)
            every = [*ids.values(), probe_id]
            stuck = [client.get(f"/v1/invocations/{i}").json() for i in every if i not in ended]
        assert not stuck, stuck
        assert set(ended.values()) == {"succeeded"}, ended

    # exactly the rows the clients were answered for: none half-accepted, none doubled
    with psycopg.connect(own_postgres.dsn("eops_outage")) as conn:
        rows = conn.execute("SELECT id, idempotency_key, state FROM invocations").fetchall()
    assert len(rows) == REQUESTS + 1
    assert {r[0] for r in rows} == {*ids.values(), probe_id}
    assert {r[2] for r in rows} == {"succeeded"}
