"""The cost of every invocation through a real gateway on the local backend (slot-seconds,
priced as the on-demand node of their GPU type): GET /v1/invocations/{id} carries it, while
running and once ended; GET /v1/cost sums it by function and hour as JSON and CSV; /metrics
exports the counters. And the live cost of an attempt on a spot node, without a cluster."""

# pytest.approx in a tuple or dict compares as the float it stands for, which mypy's strict
# equality cannot see: it would call those comparisons always false.
# mypy: disable-error-code="comparison-overlap"

from __future__ import annotations

import asyncio
import csv
import io
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from elasticityops.api.cost_routes import cost_of
from elasticityops.api.metrics import Metrics
from elasticityops.api.runtime import Runtime
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import Invocation, State, Timeline
from elasticityops.domain.node_seconds import Phase, PhaseTotal, RunningTotal
from elasticityops.pricing.table import Capacity
from helpers.server import RunningServer

T4_PER_S = 0.54 / 3600


def _function(client: httpx.Client, seconds: float) -> str:
    name = f"cost-{uuid.uuid4().hex[:8]}"
    put = client.put(
        f"/v1/functions/{name}", json={"command": ["python", "-c", f"import time; time.sleep({seconds})"]}
    )
    assert put.status_code == 201, put.text
    return name


def _invoke(client: httpx.Client, name: str) -> str:
    accepted = client.post(f"/v1/functions/{name}/invocations", json={})
    assert accepted.status_code == 202, accepted.text
    inv: str = accepted.json()["id"]
    return inv


def _until(client: httpx.Client, inv: str, states: set[str], within_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        body: dict[str, Any] = client.get(f"/v1/invocations/{inv}").json()
        if body["state"] in states:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def test_an_invocation_carries_its_slot_seconds_while_running_and_once_ended(gateway: RunningServer) -> None:
    with gateway.client() as client:
        # Long enough to still run at the second look on a loaded machine (at 1 s it had ended
        # there once, and a closed run is counted to its end, not to `as_of`).
        name = _function(client, 3.0)
        inv = _invoke(client, name)
        running = _until(client, inv, {"running"})
        assert running["cost"]["open"], "counted to now while it runs"
        assert running["node_capacity"] == "local", "a local slot, priced as the on-demand node"
        time.sleep(0.3)
        later = client.get(f"/v1/invocations/{inv}").json()
        assert later["cost"]["open"], later["state"]
        assert later["cost"]["node_seconds"]["run"] > running["cost"]["node_seconds"]["run"]
        # `as_of`: the gateway's time the open run was counted to, so a page can count on from
        # it by the gateway's clock (the console's timeline and cost read the same).
        as_of = datetime.fromisoformat(later["cost"]["as_of"])
        started = datetime.fromisoformat(later["timeline"]["started"])
        run = later["cost"]["node_seconds"]["run"]
        assert (as_of - started).total_seconds() == pytest.approx(run, abs=0.002)

        done = _until(client, inv, {"succeeded"})
        cost = done["cost"]
        assert not cost["open"]
        assert cost["node_seconds"]["run"] == pytest.approx(done["durations"]["run"])
        assert cost["node_seconds"]["idle_before_start"] == pytest.approx(done["durations"]["start"])
        assert cost["node_seconds"]["provisioning"] == 0, "a local slot is not made for it"
        assert cost["total_node_seconds"] == pytest.approx(sum(cost["node_seconds"].values()))
        assert cost["usd"] == pytest.approx(cost["total_node_seconds"] * T4_PER_S)
        assert done["node_capacity"] == "local"
        listed = client.get("/v1/invocations", params={"function": name}).json()["items"]
        assert [item["cost"] for item in listed] == [None], "lists leave it out"
        assert [item["node_capacity"] for item in listed] == ["local"], "a fact of the row: lists keep it"


def test_a_queued_invocation_has_no_node_capacity(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = _function(client, 0.1)
        body = client.get(f"/v1/invocations/{_invoke(client, name)}").json()
        assert (body["state"], body["node"], body["node_capacity"]) == ("queued", None, None)
        schema = client.get("/openapi.json").json()["components"]["schemas"]["InvocationOut"]
        assert schema["properties"]["node_capacity"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_the_report_sums_by_function_and_hour_as_json_and_csv(gateway: RunningServer) -> None:
    with gateway.client() as client:
        name = _function(client, 0.2)
        ids = [_invoke(client, name) for _ in range(2)]
        ended = [_until(client, inv, {"succeeded"}) for inv in ids]
        expected = sum(e["cost"]["total_node_seconds"] for e in ended)

        report = client.get("/v1/cost", params={"since": "1h", "by": "function"})
        assert report.status_code == 200, report.text
        [mine] = [g for g in report.json()["groups"] if g["function"] == name]
        assert mine["total_node_seconds"] == pytest.approx(expected)
        assert mine["usd"] == pytest.approx(expected * T4_PER_S)
        assert report.json()["by"] == ["function"]

        both = client.get("/v1/cost", params=[("since", "1h"), ("by", "hour"), ("by", "function")]).json()
        assert both["by"] == ["function", "hour"]
        assert sum(g["total_node_seconds"] for g in both["groups"] if g["function"] == name) == pytest.approx(
            expected
        )

        for request in (
            {"params": {"since": "1h", "by": "function", "format": "csv"}},
            {"params": {"since": "1h", "by": "function"}, "headers": {"Accept": "text/csv"}},
        ):
            answer = client.get("/v1/cost", **request)  # type: ignore[arg-type]
            assert answer.headers["content-type"].startswith("text/csv"), answer.text
            rows = {r["function"]: r for r in csv.DictReader(io.StringIO(answer.text))}
            assert float(rows[name]["total_s"]) == pytest.approx(expected, abs=0.002)
            assert set(rows[name]) >= {"provisioning_s", "idle_before_start_s", "run_s", "idle_after_s"}

        by_capacity = client.get("/v1/cost", params=[("since", "1h"), ("by", "capacity"), ("by", "function")])
        assert by_capacity.json()["by"] == ["function", "capacity"]
        [local] = [g for g in by_capacity.json()["groups"] if g["function"] == name]
        assert (local["capacity"], local["total_node_seconds"]) == ("local", pytest.approx(expected))
        as_csv = client.get("/v1/cost", params={"since": "1h", "by": "capacity", "format": "csv"})
        assert as_csv.text.splitlines()[0].startswith("capacity,provisioning_s,"), as_csv.text
        assert {r["capacity"] for r in csv.DictReader(io.StringIO(as_csv.text))} == {"local"}
        assert as_csv.headers["content-disposition"].endswith('-capacity.csv"')

        # One cluster (no MultiKueue): every group's cluster is null, and says so in the CSV.
        by_cluster = client.get("/v1/cost", params=[("since", "1h"), ("by", "cluster"), ("by", "function")])
        assert by_cluster.json()["by"] == ["function", "cluster"]
        [alone] = [g for g in by_cluster.json()["groups"] if g["function"] == name]
        assert alone["cluster"] is None
        as_csv = client.get("/v1/cost", params={"since": "1h", "by": "cluster", "format": "csv"})
        assert as_csv.text.splitlines()[0].startswith("cluster,provisioning_s,"), as_csv.text


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"by": "node"}, "by"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-01T00:00:00"}, "since"),  # no zone
        ({"since": "400d"}, "since"),
        ({"format": "xml"}, "format"),
        ({"since": "2999-01-01T00:00:00Z"}, "since"),  # after now: was a 200 of nothing (issue 37)
        ({"since": "0s"}, "since"),
    ],
)
def test_a_bad_report_request_names_the_field(
    gateway: RunningServer, params: dict[str, str], field: str
) -> None:
    with gateway.client() as client:
        answer = client.get("/v1/cost", params=params)
        assert answer.status_code == 422, answer.text
        assert [p["field"] for p in answer.json()["error"]["problems"]] == [field]


@pytest.mark.parametrize("since", ["400d", "9999d", "60w"])
def test_a_range_too_long_names_this_fields_range(gateway: RunningServer, since: str) -> None:
    # It said "use 1s to 3650d", the tokens' range, and then refused anything past 366 d (issue 37).
    with gateway.client() as client:
        [problem] = client.get("/v1/cost", params={"since": since}).json()["error"]["problems"]
    said = problem["problem"] + " " + problem["fix"]
    assert "366d" in said or "366 days" in said, said
    assert "3650" not in said, said


def test_metrics_export_node_seconds_and_dollars_per_function_and_capacity(gateway: RunningServer) -> None:
    with gateway.client() as client:
        name = _function(client, 0.2)
        done = _until(client, _invoke(client, name), {"succeeded"})
        text = client.get("/metrics").text
        # The exposition writes labels in name order.
        run_line = (
            f'eops_invocation_node_seconds_total{{capacity="local",cluster="",function="{name}",phase="run"}}'
        )
        dollars_line = f'eops_invocation_cost_dollars_total{{capacity="local",cluster="",function="{name}"}}'
        values = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line[:1] != "#"
        }
        assert values[run_line] == pytest.approx(done["cost"]["node_seconds"]["run"])
        assert values[dollars_line] == pytest.approx(done["cost"]["usd"])
        assert "# TYPE eops_invocation_node_seconds_total counter" in text


def test_the_live_cost_of_an_attempt_on_a_spot_node_is_priced_spot() -> None:
    """cost_of (the `cost` of GET /v1/invocations/{id}) counts the attempt under way to now at
    the price of its node's capacity, not the backend's."""
    now = datetime(2026, 12, 2, 10, tzinfo=UTC)
    running = Invocation(
        id="inv-1",
        function="fn",
        state=State.running,
        priority=Priority.normal,
        timeline=Timeline(
            accepted=now, capacity_ready=now - timedelta(hours=1), started=now - timedelta(hours=1)
        ),
        gpu_type="nvidia-tesla-t4",
        node="s1",
        node_capacity=Capacity.spot,
    )

    async def no_ledger(_: str) -> dict[Phase, PhaseTotal]:
        return {}

    rt = cast(
        Runtime,
        SimpleNamespace(
            store=SimpleNamespace(node_seconds_of=no_ledger),
            clock=ManualClock(now),
            settings=SimpleNamespace(backend="kubernetes"),
        ),
    )
    spot = asyncio.run(cost_of(rt, running))
    assert (spot.open, spot.seconds, spot.usd) == (True, 3600, pytest.approx(0.24))
    unknown = asyncio.run(cost_of(rt, replace(running, node_capacity=None)))
    assert unknown.usd == pytest.approx(0.54), "a node not known: on demand, the backend's"


def test_the_cost_counters_keep_each_capacity_and_cluster_apart() -> None:
    """One function's node time on spot and on demand, and in two MultiKueue workers: a series
    each, the dollars summed over the phases of each (what `sum by (capacity)` or `sum by
    (cluster)` panels read)."""
    metrics = Metrics()
    metrics.node_seconds.totals = [
        RunningTotal("fn", Phase.provisioning, Capacity.spot, 30.0, 0.002),
        RunningTotal("fn", Phase.run, Capacity.spot, 3600.0, 0.24),
        RunningTotal("fn", Phase.run, Capacity.on_demand, 3600.0, 0.54),
        RunningTotal("fn", Phase.run, Capacity.on_demand, 1800.0, 0.27, "worker-2"),
    ]
    text = metrics.render({}, {}, None).decode()
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"
    }
    seconds = "eops_invocation_node_seconds_total"
    dollars = "eops_invocation_cost_dollars_total"
    assert samples[f'{seconds}{{capacity="spot",cluster="",function="fn",phase="run"}}'] == 3600
    assert samples[f'{seconds}{{capacity="on-demand",cluster="",function="fn",phase="run"}}'] == 3600
    assert samples[f'{seconds}{{capacity="on-demand",cluster="worker-2",function="fn",phase="run"}}'] == 1800
    assert samples[f'{dollars}{{capacity="spot",cluster="",function="fn"}}'] == pytest.approx(0.242)
    assert samples[f'{dollars}{{capacity="on-demand",cluster="",function="fn"}}'] == pytest.approx(0.54)
    assert samples[f'{dollars}{{capacity="on-demand",cluster="worker-2",function="fn"}}'] == pytest.approx(
        0.27
    )
