"""`eops cost` and the node time in `eops status`, against a real gateway on the local
backend; the Python client's cost_report and cost_csv with it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from rich.console import Console

from elasticityops.cli.render_cost import cost_table
from elasticityops.client import Client
from elasticityops.wire import CostGroupOut, CostReportOut
from helpers.server import RunningServer

from .runner import Eops

NAME = "cli-cost"


@pytest.fixture(scope="module")
def ended(api_module: Client) -> str:
    api_module.deploy_function({"name": NAME, "command": ["python", "-c", "import time; time.sleep(0.3)"]})
    inv = api_module.invoke(NAME)
    done = api_module.wait(inv.id, timeout=60)
    assert done.state.value == "succeeded", done
    return done.id


@pytest.fixture(scope="module")
def api_module(server: RunningServer) -> Iterator[Client]:
    with Client(server.url, server.token) as client:
        yield client


def test_status_shows_the_node_time_and_its_cost(eops: Eops, ended: str) -> None:
    shown = eops("status", ended)
    assert shown.code == 0, shown.output
    assert "node time: " in shown.stdout
    assert "run" in shown.stdout.split("node time: ", 1)[1].splitlines()[0]
    assert "node priced local" in " ".join(shown.stdout.split()), "a local slot, beside its cost"


def test_cost_by_function_as_a_table_json_and_csv(eops_process: Eops, api_module: Client, ended: str) -> None:
    eops = eops_process  # the cost family's real-process test (runner.py)
    report = api_module.cost_report(since="1h", by=["function"])
    [mine] = [g for g in report.groups if g.function == NAME]
    assert mine.node_seconds["run"] >= 0.3

    table = eops("cost", "--since", "1h", "--by", "function")
    assert table.code == 0, table.output
    [line] = [row for row in table.stdout.splitlines() if row.startswith(NAME)]
    assert "$" in line

    as_json = eops("cost", "--since", "1h", "--by", "function", "--json")
    assert as_json.code == 0, as_json.output
    groups = {g["function"]: g for g in json.loads(as_json.stdout)["groups"]}
    assert groups[NAME]["total_node_seconds"] == pytest.approx(mine.total_node_seconds)

    as_csv = eops("cost", "--since", "1h", "--by", "function", "--by", "hour", "--csv")
    assert as_csv.code == 0, as_csv.output
    rows = [r for r in csv.DictReader(io.StringIO(as_csv.stdout)) if r["function"] == NAME]
    assert rows, as_csv.stdout
    assert sum(float(r["total_s"]) for r in rows) == pytest.approx(mine.total_node_seconds, abs=0.002)
    assert api_module.cost_csv(since="1h", by=["function"]).splitlines()[0].startswith("function,")


def test_cost_refuses_a_bad_grouping_naming_it(eops: Eops) -> None:
    refused = eops("cost", "--by", "node")
    assert refused.code != 0
    assert "by" in refused.output
    assert "function, hour, capacity and/or cluster" in refused.output


def test_cost_by_capacity_says_what_the_node_time_was_priced_as(eops_process: Eops, ended: str) -> None:
    # A process of its own: in-process, the table's width is the one the console got when the
    # first test of this worker imported the CLI (80 columns cut the function's name).
    table = eops_process("cost", "--since", "1h", "--by", "function", "--by", "capacity")
    assert table.code == 0, table.output
    assert "CAPACITY" in table.stdout, table.stdout
    [line] = [row for row in table.stdout.splitlines() if row.startswith(NAME)]
    assert "local" in line, "a local slot"


def test_cost_has_help(eops: Eops) -> None:
    shown = eops("cost", "--help")
    assert shown.code == 0, shown.output
    assert "--since" in shown.stdout
    assert "--by" in shown.stdout


def test_the_table_shows_run_again_only_where_a_group_has_any() -> None:
    """MultiKueue's second runs (docs/cost.md) get a column of their own, and only then."""

    def report(*groups: CostGroupOut) -> str:
        at = datetime(2026, 12, 7, 12, tzinfo=UTC)
        out = CostReportOut(
            since=at, until=at, by=["cluster"], groups=list(groups), total_node_seconds=1, usd=0
        )
        console = Console(width=200, record=True)
        console.print(cost_table(out))
        return console.export_text()

    once = CostGroupOut(cluster="worker-1", node_seconds={"run": 60.0}, total_node_seconds=60, usd=0.01)
    twice = CostGroupOut(
        cluster="worker-2", node_seconds={"run": 60.0, "run_again": 30.0}, total_node_seconds=90, usd=0.02
    )
    assert "RUN AGAIN" not in report(once)
    shown = report(once, twice)
    assert "RUN AGAIN" in shown
    [line] = [row for row in shown.splitlines() if row.startswith("worker-2")]
    assert "30s" in line.replace(" ", "") or "30.0s" in line, line
