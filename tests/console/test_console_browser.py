"""The console in a real browser (Debian's chromium, headless, through Playwright) against a real
gateway running real invocations on the local backend: log in with the keyboard, see an
invocation appear and finish without a reload, open its timeline, see why one failed, watch the
capacity page move when a burst arrives, read the functions page, invoke a function from its
view and read its time series, every page at 1400 and 420 px wide, log out. The screenshots
these tests take are docs/console/*.png (docs/console.md) and, for every page at both widths,
test output (`EOPS_CONSOLE_SHOTS`, docs/testing.md)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from elasticityops.domain.invocations import new_invocation_id
from helpers.browser import chromium
from helpers.examples import example_json
from helpers.server import REPO, RunningServer, running_server

# The screenshots in docs/console.md: rewritten by a run with EOPS_UPDATE_SCREENSHOTS=1, so that an
# ordinary run (CI's) leaves the checkout as it found it.
SHOTS = REPO / "docs" / "console"
FIRST_LOAD_LIMIT = 300 * 1024
# Every page at a desktop's and a phone's width: test output, in $EOPS_CONSOLE_SHOTS when set
# (CI keeps that folder as an artifact), else in this run's pytest temporary directory.
WIDTHS = (1400, 420)
# A function that fails with a line on stderr: what its page must explain.
FAILING = {
    "name": "broken",
    "command": ["python", "-c", "import sys; print('no such model: gpt-0', file=sys.stderr); sys.exit(3)"],
    "gpu": {"type": "nvidia-tesla-t4", "count": 1},
    "timeout_seconds": 60,
}
# A time with its zone, as the pages write every time: "2026-12-06 09:50:26 UTC" or "... GMT+5:30".
ZONED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|GMT[+-]\d{1,2}(:\d\d)?|[A-Z]{2,5})$")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return SHOTS if os.environ.get("EOPS_UPDATE_SCREENSHOTS") == "1" else tmp_path_factory.mktemp("shots")


@pytest.fixture(scope="module")
def page_shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("EOPS_CONSOLE_SHOTS")
    if not where:
        return tmp_path_factory.mktemp("console-pages")
    Path(where).mkdir(parents=True, exist_ok=True)
    return Path(where)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(
        tmp_path_factory.mktemp("console-gw"),
        "--gpus",
        "2",
        env={"EOPS_CONSOLE_SAMPLE_SECONDS": "1"},
    ) as gw:
        with gw.client() as http:
            for name in ("hello", "sleep"):
                put = http.put(f"/v1/functions/{name}", content=example_json(name))
                assert put.status_code in (200, 201), put.text
            put = http.put("/v1/functions/broken", json=FAILING)
            assert put.status_code in (200, 201), put.text
        yield gw


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture(scope="module")
def page(browser: BrowserContext, gateway: RunningServer) -> Page:
    """One tab, logged in with the keyboard: what the tests below carry on with."""
    tab = browser.new_page()
    transferred: list[int] = []
    tab.on(
        "requestfinished",
        lambda r: transferred.append(r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"]),
    )
    tab.goto(gateway.url + "/ui")
    expect(tab.locator("#token")).to_be_focused()
    tab.keyboard.type(gateway.token)
    tab.keyboard.press("Enter")
    expect(tab.locator("#who")).to_have_text("admin (admin)")
    expect(tab.locator("#list-status")).to_be_visible()
    assert sum(transferred) < FIRST_LOAD_LIMIT, f"first load moved {sum(transferred)} bytes"
    return tab


@contextlib.contextmanager
def _answered(page: Page, gateway: RunningServer, url: str, body: object, where: str) -> Iterator[None]:
    """The page at `where` with the gateway's answers to `url` (a pattern) replaced by `body`:
    what a gateway this module does not run (a MultiKueue manager's) would answer. It is opened
    from another page, so that it reads anew; the real answers and the home page come back after."""
    pattern = re.compile(url)
    page.route(pattern, lambda route: route.fulfill(json=body))
    try:
        page.goto(gateway.url + "/ui#/")
        page.goto(gateway.url + "/ui" + where)
        yield
    finally:
        page.unroute(pattern)
        page.goto(gateway.url + "/ui#/")


def _invoke(gateway: RunningServer, function: str, payload: object = None) -> str:
    with gateway.client() as http:
        answer = http.post(f"/v1/functions/{function}/invocations", json=payload)
        assert answer.status_code == 202, answer.text
        return str(answer.json()["id"])


def test_an_invocation_appears_and_finishes_without_a_reload(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    page.evaluate("window.sameDocument = true")  # gone if the page were loaded again
    invocation = _invoke(gateway, "sleep", {"seconds": 2})
    row = page.locator(f'tr[data-id="{invocation}"]')
    expect(row).to_be_visible(timeout=10_000)
    expect(row).to_have_attribute("data-state", "running", timeout=10_000)
    expect(row).to_have_attribute("data-state", "succeeded", timeout=20_000)
    assert page.evaluate("window.sameDocument") is True
    page.screenshot(path=shots / "invocations.png")


def test_the_invocation_page_shows_its_timeline_result_and_logs(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    invocation = _invoke(gateway, "sleep", {"seconds": 2})
    link = page.locator(f'tr[data-id="{invocation}"] a')
    expect(link).to_be_visible(timeout=10_000)
    link.focus()
    page.keyboard.press("Enter")  # the keyboard opens it as well as a click
    expect(page.locator("h1")).to_have_text(invocation)
    # Followed while it runs, then the end, all on this one page.
    expect(page.locator("#logs")).to_contain_text("sleeping 2s", timeout=15_000)
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "succeeded", timeout=20_000)
    phases = page.locator(".waterfall .phase")
    expect(phases).to_have_count(4)
    assert phases.evaluate_all("ps => ps.map(p => p.dataset.phase)") == ["queue", "capacity", "start", "run"]
    expect(page.locator("pre.result")).to_contain_text('"slept_seconds": 2')
    run = page.locator('#cost dd[data-phase="run"]')
    expect(page.locator("#cost")).to_have_attribute("data-open", "false", timeout=10_000)
    assert float(run.get_attribute("data-seconds") or 0) >= 2, "it slept 2 s on its slot"
    expect(page.locator("#cost dd[data-capacity]")).to_have_text("local")  # node_capacity
    expect(page.locator("#cancel")).to_be_hidden()
    page.screenshot(path=shots / "invocation.png", full_page=True)


def test_cancel_from_the_page_sends_the_csrf_header(page: Page, gateway: RunningServer) -> None:
    invocation = _invoke(gateway, "sleep", {"seconds": 30})
    page.goto(f"{gateway.url}/ui#/invocations/{invocation}")
    expect(page.locator("#cancel")).to_be_visible(timeout=10_000)
    page.locator("#cancel").click()
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "cancelled", timeout=20_000)
    with gateway.client() as http:
        assert http.get(f"/v1/invocations/{invocation}").json()["state"] == "cancelled"


def test_the_capacity_page_moves_when_a_burst_arrives(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/v1/capacity" in r.url else None)
    page.goto(gateway.url + "/ui#/capacity")
    queue = page.locator("[data-queue]")
    expect(queue).to_have_attribute("data-queue", "0", timeout=10_000)
    burst = [_invoke(gateway, "sleep", {"seconds": 4}) for _ in range(8)]
    # Two GPU slots: two run, six wait; the page shows it without a reload (waited for, not read
    # at once: on a loaded machine the page's refresh may come seconds after the burst).
    expect(page.locator("#gpus")).to_have_attribute("data-in-use", "2", timeout=10_000)
    expect(queue).to_have_attribute("data-queue", re.compile(r"^[2-6]$"), timeout=10_000)
    assert page.locator("#queue a").text_content() in burst, "the head of the queue is one of the burst"
    # Its GPU type has no cap of its own (no --gpu-budget): drawn against the two slots, not
    # an empty bar.
    t4 = page.locator('#gpus [data-meter="nvidia-tesla-t4"]')
    expect(t4).to_have_attribute("data-cap", "2")
    expect(t4.locator(".value")).to_have_text("2 of 2 (no cap of its own)")
    # The bar read in the same render as its count: on a loaded machine the page's next sample
    # can come between two reads, with a slot free for a moment between two jobs.
    page.wait_for_function(
        """() => {
            const m = document.querySelector('#gpus [data-meter="nvidia-tesla-t4"]');
            return m !== null && m.dataset.used !== "0"
                && m.querySelector(".bar").getBoundingClientRect().width > 0;
        }""",
        timeout=10_000,
    )
    time.sleep(2.5)  # two samples of the burst in the chart
    page.screenshot(path=shots / "capacity.png")
    # The chart is named for the span its samples cover (seconds here, at a sample a second),
    # and its y axis has a scale of round numbers, not one label.
    with gateway.client() as http:
        history = http.get("/v1/capacity").json()["history"]
    first, last = (datetime.fromisoformat(history[i]["at"]) for i in (0, -1))
    covered = (last - first).total_seconds()
    title = page.locator("#h-history")
    expect(title).to_have_text(re.compile(r"^The last \d+(\.\d)? (s|min)$"))
    shown = float(title.get_attribute("data-span-s") or 0)
    assert abs(shown - covered) <= 12, (title.text_content(), covered)
    labels = page.locator("#capacity-chart .y-tick").all_text_contents()
    assert len(labels) >= 3, labels
    assert labels[0] == "0", labels
    assert all(label.isdigit() for label in labels), labels
    expect(queue).to_have_attribute("data-queue", "0", timeout=60_000)
    points = page.locator("polyline.l-demand").get_attribute("points") or ""
    # The page read the whole history once, then only what was new; the chart kept it all.
    assert asked, "the page never read /v1/capacity"
    assert "since=" not in asked[0], asked[:3]
    assert any("since=" in url for url in asked[1:]), asked[:3]
    assert len(points.split()) >= 4, points


def test_the_functions_page_shows_success_rate_and_p95_time_to_start(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    _invoke(gateway, "hello")
    page.goto(gateway.url + "/ui#/functions")
    sleep_row = page.locator('tr[data-function="sleep"]')
    expect(sleep_row).to_be_visible()
    expect(sleep_row.locator("td.stats")).to_contain_text("% of", timeout=10_000)
    expect(page.locator('tr[data-function="hello"]')).to_be_visible()
    # What the local backend runs: the command in its directory, not the image it ignores.
    runs = sleep_row.locator("td.runs summary")
    expect(runs).to_contain_text("python sleep.py")
    expect(runs).to_contain_text("examples")
    expect(runs).not_to_contain_text("python:3.11-slim")
    expect(page.locator("thead")).to_contain_text("Runs (local backend)")
    page.screenshot(path=shots / "functions.png")


def test_the_cost_page_shows_each_functions_node_seconds_and_an_hourly_chart(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    with gateway.client() as http:
        assert http.post("/v1/functions/hello/invocations?wait=30").json()["state"] == "succeeded"
    page.goto(gateway.url + "/ui#/cost")
    expect(page.locator('nav a[data-page="cost"]')).to_have_attribute("aria-current", "page")
    for function in ("sleep", "hello"):  # sleep: the burst of the capacity test, and before
        run = page.locator(f'#cost-table tr[data-function="{function}"] td[data-phase="run"]')
        expect(run).to_be_visible(timeout=10_000)
        assert float(run.get_attribute("data-seconds") or 0) > 0, function
    expect(page.locator("#cost-chart g.hour rect.b-run").first).to_be_visible()
    # Split by what the node time was priced as: on the local backend, all of it GPU slots.
    local_run = page.locator('#capacity-table tr[data-capacity="local"] td[data-phase="run"]')
    expect(local_run).to_be_visible()
    expect(page.locator("#capacity-table tbody tr")).to_have_count(1)
    assert float(local_run.get_attribute("data-seconds") or 0) > 0
    totals = page.evaluate(
        """() => ['#cost-table', '#capacity-table'].map(t =>
            [...document.querySelectorAll(`${t} tbody td[data-phase]`)]
                .reduce((s, td) => s + parseFloat(td.dataset.seconds), 0))"""
    )
    assert totals[0] == pytest.approx(totals[1], abs=0.01), "the same node time, split two ways"
    expect(page.locator("#cluster-table")).to_have_count(0)  # one cluster: nothing to split
    page.screenshot(path=shots / "cost.png", full_page=True)
    # Another run moves the numbers without a reload (the page reads again on the event stream).
    hello_run = '#cost-table tr[data-function="hello"] td[data-phase="run"]'
    before = float(page.locator(hello_run).get_attribute("data-seconds") or 0)
    _invoke(gateway, "hello")
    page.wait_for_function(
        "([cell, before]) => parseFloat(document.querySelector(cell).dataset.seconds) > before",
        arg=[hello_run, before],
        timeout=15_000,
    )
    page.locator("details.hours summary").focus()
    page.keyboard.press("Enter")  # the chart's numbers, for the keyboard and screen readers
    expect(page.locator("#hour-table tbody tr")).not_to_have_count(0)
    # The range is a keyboard choice, and the page's address keeps it.
    page.locator("#since").focus()
    page.keyboard.press("ArrowUp")  # 24h -> 1h
    expect(page).to_have_url(re.compile(r"#/cost/1h$"))
    expect(page.locator("#since")).to_have_value("1h")
    expect(page.locator("#csv")).to_have_attribute("href", re.compile(r"since=1h.*format=csv"))


def test_the_capacity_page_splits_gpus_in_use_and_gpu_nodes_by_cluster_where_several_run_them(
    page: Page, gateway: RunningServer
) -> None:
    """The gateway of this module runs one cluster, and its page shows no split; what a
    MultiKueue manager's gateway answers (`in_use_by_cluster` and `nodes_by_cluster`, read from
    a real one in the multikueue lane) is given to the page as it would come, to see the page
    draw it."""
    page.goto(gateway.url + "/ui#/capacity")
    expect(page.locator("#gpus")).to_have_attribute("data-in-use", re.compile(r"^\d+$"), timeout=10_000)
    expect(page.locator("#gpus-by-cluster")).to_have_count(0)
    with gateway.client() as http:
        now = http.get("/v1/capacity").json()
    several = {
        **now,
        "in_use": {"nvidia-tesla-t4": 5},
        "in_use_total": 5,
        "in_use_by_cluster": {"worker-1": {"nvidia-tesla-t4": 2}, "worker-2": {"nvidia-tesla-t4": 3}},
        "nodes": {"provisioning": 1, "ready": 5, "idle": 2, "scaling_down": 0},
        "nodes_by_cluster": {
            "worker-1": {"provisioning": 0, "ready": 2, "idle": 2, "scaling_down": 0},
            "worker-2": {"provisioning": 1, "ready": 3, "idle": 0, "scaling_down": 0},
        },
    }
    expect(page.locator("#nodes-by-cluster")).to_have_count(0)
    with _answered(page, gateway, r"/v1/capacity", several, "#/capacity"):
        rows = page.locator("#gpus-by-cluster [data-cluster]")
        expect(rows).to_have_count(2)
        for cluster, used in (("worker-1", "2"), ("worker-2", "3")):
            row = page.locator(f'#gpus-by-cluster [data-cluster="{cluster}"]')
            expect(row).to_have_attribute("data-used", used)
            expect(row.locator(".value")).to_have_text(f"{used} of 5 (no cap of its own)")
        # Each worker's GPU nodes by state, a row each.
        expect(page.locator("#nodes-by-cluster tbody tr")).to_have_count(2)
        for cluster, counts in several["nodes_by_cluster"].items():
            for state, n in counts.items():
                cell = page.locator(f'#nodes-by-cluster [data-cluster="{cluster}"] [data-state="{state}"]')
                expect(cell).to_have_text(str(n))


def test_the_cost_page_splits_the_node_time_by_cluster_where_several_ran_it(
    page: Page, gateway: RunningServer
) -> None:
    """The gateway of this module runs one cluster; what a MultiKueue manager's gateway answers
    (GET /v1/cost?by=cluster, tests/api/test_cost.py and the multikueue lane) is given to the page
    as it would come, to see the page draw it."""

    def group(cluster: str | None, run: float) -> dict[str, object]:
        phases = {
            "provisioning": 0.0,
            "idle_before_start": 0.0,
            "run": run,
            "idle_after": 0.0,
            "warm_unused": 0.0,
        }
        return {
            "function": "hello",
            "hour": "2026-12-06T10:00:00Z",
            "capacity": "on-demand",
            "cluster": cluster,
            "node_seconds": phases,
            "total_node_seconds": run,
            "usd": run * 0.00015,
            "unpriced_node_seconds": 0.0,
        }

    groups = [group("worker-1", 30.0), group("worker-2", 50.0), group(None, 5.0)]
    report = {
        "since": "2026-12-06T09:30:00Z",
        "until": "2026-12-06T10:30:00Z",
        "by": ["function", "hour", "capacity", "cluster"],
        "groups": groups,
        "total_node_seconds": 85.0,
        "usd": 85 * 0.00015,
        "unpriced_node_seconds": 0.0,
    }
    with _answered(page, gateway, r"/v1/cost\?", report, "#/cost/7d"):
        rows = page.locator("#cluster-table tbody tr")
        expect(rows).to_have_count(3)
        for cluster, run in (("worker-1", "30.000"), ("worker-2", "50.000")):
            cell = page.locator(f'#cluster-table tr[data-cluster="{cluster}"] td[data-phase="run"]')
            expect(cell).to_have_attribute("data-seconds", run)
        expect(page.locator('#cluster-table tr[data-cluster=""] th')).to_have_text(
            "(none: warm capacity, or one cluster)"
        )


def test_the_cost_csv_downloads_with_the_session_cookie(page: Page, gateway: RunningServer) -> None:
    page.goto(gateway.url + "/ui#/cost/24h")
    with page.expect_download() as download:
        page.locator("#csv").click()
    saved = download.value
    assert re.fullmatch(
        r"eops-cost-\d{8}T\d{4}Z-\d{8}T\d{4}Z-function-hour-capacity-cluster\.csv", saved.suggested_filename
    )
    header, *rows = Path(saved.path()).read_text().splitlines()
    assert header.startswith("function,hour,capacity,cluster,provisioning_s,idle_before_start_s,run_s,"), (
        header
    )
    sleep_rows = [row.split(",") for row in rows if row.startswith("sleep,")]
    assert sleep_rows, rows
    assert {row[2] for row in sleep_rows} == {"local"}, "each row says what it was priced as"


def test_a_failed_invocation_says_that_it_failed_and_why(page: Page, gateway: RunningServer) -> None:
    invocation = _invoke(gateway, "broken")
    page.goto(f"{gateway.url}/ui#/invocations/{invocation}")
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "failed", timeout=20_000)
    result = page.locator("pre.result")
    expect(result).to_have_attribute("data-outcome", "failed")
    # The state, the reason, the message and the end of its output: never "(none yet)".
    expect(result).to_contain_text("failed (exit code)")
    expect(result).to_contain_text("no such model: gpt-0", timeout=10_000)
    assert "none yet" not in (result.text_content() or "")
    # It has no notes: no list, no heading (an empty list read as "1. none").
    with gateway.client() as http:
        assert http.get(f"/v1/invocations/{invocation}").json()["notes"] == []
    expect(page.locator("#notes")).to_be_hidden()
    expect(page.locator("#notes li")).to_have_count(0)
    expect(page.get_by_role("heading", name="Notes")).to_be_hidden()


def test_the_timeline_and_the_cost_count_a_running_phase_alike(
    browser: BrowserContext, gateway: RunningServer
) -> None:
    """Seconds after the page's last read, with this browser's clock 7 minutes ahead of the
    gateway's: the run phase of the timeline and of the cost block read the same (they were
    61.0 s and 57.0 s: the cost stood at the last read while the timeline ran on the browser's
    clock)."""
    tab = browser.new_page()  # the session cookie is the context's: logged in already
    tab.add_init_script("{ const real = Date.now; Date.now = () => real() + 7 * 60 * 1000; }")
    invocation = _invoke(gateway, "sleep", {"seconds": 12})
    tab.goto(f"{gateway.url}/ui#/invocations/{invocation}")
    expect(tab.locator("dl.facts")).to_have_attribute("data-state", "running", timeout=15_000)
    run = '.waterfall .phase[data-phase="run"]'
    tab.wait_for_function(
        "sel => parseFloat(document.querySelector(sel)?.dataset.seconds) >= 4", arg=run, timeout=15_000
    )
    timeline, cost = tab.evaluate(
        """sel => [parseFloat(document.querySelector(sel).dataset.seconds),
            parseFloat(document.querySelector('#cost dd[data-phase="run"]').dataset.seconds)]""",
        run,
    )
    assert timeline < 12, f"the timeline ran on the browser's clock: {timeline} s"
    assert cost == pytest.approx(timeline, abs=0.05), (timeline, cost)
    with gateway.client() as http:
        assert http.post(f"/v1/invocations/{invocation}/cancel").status_code in (200, 202)
    tab.close()


def test_timestamps_carry_their_zone(browser: BrowserContext, gateway: RunningServer) -> None:
    """In the browser's zone, named: Asia/Kolkata (UTC+5:30) here, so the hour and the name
    both move."""
    tab = browser.new_page()
    cdp = browser.new_cdp_session(tab)
    cdp.send("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    invocation = _invoke(gateway, "hello")
    tab.goto(f"{gateway.url}/ui#/invocations")
    accepted = tab.locator(f'tr[data-id="{invocation}"] td').nth(3)
    expect(accepted).to_have_text(ZONED, timeout=10_000)
    with gateway.client() as http:
        utc = datetime.fromisoformat(http.get(f"/v1/invocations/{invocation}").json()["timeline"]["accepted"])
    local = utc.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert accepted.text_content() == local.strftime("%Y-%m-%d %H:%M:%S GMT+5:30")
    tab.goto(f"{gateway.url}/ui#/capacity")
    expect(tab.locator("#history p.muted")).to_contain_text("GMT+5:30", timeout=10_000)
    cdp.detach()
    tab.close()


def test_invoke_from_a_functions_view_and_follow_it(page: Page, gateway: RunningServer, shots: Path) -> None:
    page.goto(gateway.url + "/ui#/functions")
    page.locator('tr[data-function="hello"] th a').click()
    expect(page).to_have_url(re.compile(r"#/functions/hello$"))
    expect(page.locator('nav a[data-page="functions"]')).to_have_attribute("aria-current", "page")
    payload = page.locator("#payload")
    # Its example input (examples/hello.yaml's `example`), to edit.
    expect(payload).to_have_attribute("data-from", "example")
    assert json.loads(payload.input_value()) == {"name": "Ada"}
    # Not JSON: said on the page, and nothing is sent.
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    payload.fill('{"name": Ada}')
    page.locator("#invoke").click()
    expect(page.locator("#invoked .error")).to_contain_text("not JSON")
    assert sent == []
    payload.fill('{"name": "Grace"}')
    page.locator("#invoke").click()  # the session cookie and the CSRF header, as cancel sends
    link = page.locator("#invoked a[data-id]")
    expect(link).to_be_visible(timeout=10_000)
    invocation = link.get_attribute("data-id") or ""
    with gateway.client() as http:
        assert http.get(f"/v1/invocations/{invocation}").json()["function"] == "hello"
    link.click()
    expect(page.locator("h1")).to_have_text(invocation)
    expect(page.locator("dl.facts")).to_have_attribute("data-state", "succeeded", timeout=20_000)
    expect(page.locator("pre.result")).to_contain_text("hello, Grace!")
    page.go_back()
    expect(page.locator('svg[data-series="p95"] rect').first).to_be_attached(timeout=10_000)
    page.screenshot(path=shots / "function.png", full_page=True)


def test_a_functions_view_draws_its_invocations_failures_and_p95_over_time(
    page: Page, gateway: RunningServer
) -> None:
    with gateway.client() as http:
        for _ in range(2):
            assert http.post("/v1/functions/broken/invocations?wait=30").json()["state"] == "failed"
        listed = http.get("/v1/invocations", params={"function": "broken", "limit": 500}).json()["items"]
    page.goto(gateway.url + "/ui#/functions/broken")
    # A spec without an example input: an empty object to edit.
    expect(page.locator("#payload")).to_have_value("{}")
    expect(page.locator("#payload")).to_have_attribute("data-from", "empty")
    series = page.locator("#series")
    expect(series).to_have_attribute("data-total", str(len(listed)), timeout=10_000)

    def summed(name: str) -> float:
        values = page.locator(f'svg[data-series="{name}"] rect').evaluate_all(
            "rs => rs.map(r => parseFloat(r.dataset.value))"
        )
        return float(sum(values))

    assert summed("invocations") == len(listed)
    assert summed("failures") == len([i for i in listed if i["state"] in ("failed", "timed_out")]) >= 2
    p95 = page.locator('svg[data-series="p95"] rect')
    expect(p95.first).to_be_attached()
    assert page.locator('svg[data-series="invocations"] .y-tick').count() >= 2, "a y axis with a scale"
    expect(page.locator("#series-covers")).to_contain_text("last hour in buckets of 5.0 min")
    page.locator("#range").select_option("24h")
    expect(page).to_have_url(re.compile(r"#/functions/broken\?range=24h$"))
    expect(page.locator("#series-covers")).to_contain_text("last 24 hours in buckets of 60.0 min")
    expect(page.locator('svg[data-series="invocations"] rect')).to_have_count(24)


def test_a_batchs_page_follows_it_to_the_end_and_links_its_invocations(
    page: Page, gateway: RunningServer, shots: Path
) -> None:
    """Four 2 s jobs on two GPUs: the page opens before the second pair can have ended, its
    counts move to all succeeded without a reload, and it links each invocation's page, which
    links back. Its idempotency key, free text a client chose, is shown as text."""
    hostile = '<img src=x onerror="window.pwned=1">'
    with gateway.client() as http:
        answer = http.post(
            "/v1/functions/sleep/invocations:batch",
            json={"inputs": [{"seconds": 2}] * 4},
            headers={"Idempotency-Key": hostile},
        )
        assert answer.status_code == 202, answer.text
    batch, ids = answer.json()["batch_id"], answer.json()["invocation_ids"]
    page.goto(f"{gateway.url}/ui#/batches/{batch}")
    page.evaluate("window.sameDocument = true")
    expect(page.locator("h1")).to_have_text(batch)
    expect(page.locator('nav a[data-page="invocations"]')).to_have_attribute("aria-current", "page")
    progress = page.locator("#batch-progress-text")
    expect(progress).to_have_attribute("data-ended", re.compile(r"^[0-3]$"))
    expect(page.locator("#cancel")).to_be_visible()
    expect(page.locator("#batch-counts [data-state=succeeded]")).to_have_attribute(
        "data-count", "4", timeout=30_000
    )
    expect(progress).to_have_text("4 of 4")
    expect(page.locator("#batch-counts [data-state]")).to_have_count(1)
    expect(page.locator("#batch-facts")).to_have_attribute("data-done", "true")
    expect(page.locator("#cancel")).to_be_hidden()
    expect(page.locator("#batch-facts dd").filter(has_text="onerror")).to_have_text(hostile)
    rows = page.locator("tbody tr")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.id)") == ids  # input order
    expect(page.locator('tbody tr[data-state="succeeded"]')).to_have_count(4)
    assert page.evaluate("window.sameDocument") is True
    assert page.evaluate("window.pwned") is None
    page.screenshot(path=shots / "batch.png", full_page=True)
    page.locator(f'tr[data-id="{ids[2]}"] a').click()
    expect(page.locator("h1")).to_have_text(ids[2])
    page.locator("#batch-link").click()
    expect(page.locator("h1")).to_have_text(batch)
    # The invocations list filters by batch and links each row's batch.
    page.goto(f"{gateway.url}/ui#/invocations?batch={batch}")
    expect(page.locator("#f-batch")).to_have_value(batch)
    expect(page.locator("tbody tr")).to_have_count(4)
    expect(page.locator(f'tbody a.batch[href="#/batches/{batch}"]')).to_have_count(4)


def test_a_batch_is_cancelled_from_its_page_after_a_confirm(page: Page, gateway: RunningServer) -> None:
    with gateway.client() as http:
        answer = http.post("/v1/functions/sleep/invocations:batch", json={"inputs": [{"seconds": 30}] * 3})
        assert answer.status_code == 202, answer.text
    batch = answer.json()["batch_id"]
    page.goto(f"{gateway.url}/ui#/batches/{batch}")
    page.locator("#cancel").click()
    expect(page.locator("#cancel-question")).to_contain_text("Cancel the 3 invocations")
    page.locator("#cancel-keep").click()  # the first answer keeps them
    expect(page.locator("#cancel-box")).to_be_hidden()
    page.locator("#cancel").click()
    page.locator("#cancel-confirm").click()  # the session cookie and the CSRF header
    expect(page.locator("#batch-counts [data-state=cancelled]")).to_have_attribute(
        "data-count", "3", timeout=20_000
    )
    expect(page.locator("#cancel")).to_be_hidden()
    with gateway.client() as http:
        assert http.get(f"/v1/batches/{batch}").json()["counts"]["cancelled"] == 3
    # One that is not there: the page says so, naming the id.
    page.goto(f"{gateway.url}/ui#/batches/bat-nope")
    expect(page.locator("main .error")).to_contain_text("no batch 'bat-nope'")


PAGES = ("invocations", "invocation", "batch", "capacity", "functions", "function", "cost")


def test_every_page_at_1400_and_420_px(page: Page, gateway: RunningServer, page_shots: Path) -> None:
    """A screenshot of each page at both widths (test output), and at 420 px nothing cut off:
    the page never scrolls sideways (a wide table scrolls in its own box) and every page's
    link is on screen."""
    invocation = _invoke(gateway, "hello")
    with gateway.client() as http:
        batch = http.post("/v1/functions/hello/invocations:batch", json={"inputs": [{}] * 3}).json()[
            "batch_id"
        ]
    where = {
        "invocations": "#/invocations",
        "invocation": f"#/invocations/{invocation}",
        "batch": f"#/batches/{batch}",
        "capacity": "#/capacity",
        "functions": "#/functions",
        "function": "#/functions/sleep",
        "cost": "#/cost",
    }
    ready = {
        "invocations": "#list-status",
        "invocation": 'dl.facts[data-state="succeeded"]',
        "batch": '#batch-facts[data-done="true"]',
        "capacity": "#capacity-chart",
        "functions": 'tr[data-function="sleep"]',
        "function": 'svg[data-series="p95"]',
        "cost": "#cost-chart",
    }
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for name in PAGES:
                page.goto(f"{gateway.url}/ui{where[name]}")
                expect(page.locator(ready[name])).to_be_attached(timeout=20_000)
                page.screenshot(path=page_shots / f"{name}-{width}.png", full_page=True)
                overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, f"{name} at {width} px scrolls {overflow} px sideways"
                for link in page.locator("nav a").all():
                    box = link.bounding_box()
                    assert box is not None, name
                    assert 0 <= box["x"] <= box["x"] + box["width"] <= width, (name, box)
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})
    assert sorted(p.name for p in page_shots.glob("*.png")) == sorted(
        f"{name}-{width}.png" for name in PAGES for width in WIDTHS
    )


def test_keyboard_reaches_every_page_from_the_top(page: Page, gateway: RunningServer) -> None:
    page.goto(gateway.url + "/ui#/functions")
    expect(page.locator("h1")).to_have_text("Functions")
    page.locator(".brand").click()  # the keyboard's starting point: the top of the page
    page.keyboard.press("Tab")
    expect(page.locator('nav a[data-page="invocations"]')).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.locator(".skip")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.locator('nav a[data-page="capacity"]')).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Capacity")


def test_the_invocation_page_shows_its_webhook_deliveries(page: Page, gateway: RunningServer) -> None:
    # A host that never resolves: the delivery fails, and the page says so and when it is tried next.
    with gateway.client() as http:
        spec = {"command": ["true"], "webhook": {"url": "https://hook.invalid/eops"}}
        assert http.put("/v1/functions/hooked", json=spec).status_code in (200, 201)
    invocation = _invoke(gateway, "hooked")
    page.goto(f"{gateway.url}/ui#/invocations/{invocation}")
    row = page.locator(f'#webhooks tr[data-id="{invocation}.completed"]')
    expect(row).to_be_visible(timeout=20_000)
    expect(row.locator("td").nth(0)).to_have_text("invocation.completed")
    expect(row.locator("td").nth(2)).to_contain_text("could not resolve hook.invalid", timeout=20_000)
    expect(row).to_have_attribute("data-delivered", "false")
    # An invocation without a webhook has no such section.
    plain = _invoke(gateway, "broken")
    page.goto(f"{gateway.url}/ui#/invocations/{plain}")
    expect(page.locator("h1")).to_have_text(plain)
    expect(page.locator("#webhooks")).to_be_hidden()


def test_log_out_ends_the_session(page: Page, gateway: RunningServer) -> None:
    page.locator("#logout").click()
    expect(page.locator("#token")).to_be_visible()
    status = page.evaluate("fetch('/v1/invocations').then(r => r.status)")
    assert status == 401
    assert httpx.get(gateway.url + "/ui/session", timeout=10).status_code == 401


def test_the_pages_pure_helpers_agree_with_the_server(page: Page, gateway: RunningServer) -> None:
    """format.js run in the browser: a time's keyset cursor sorts exactly where the server's
    ids of that millisecond begin, the phases, percentile and stats read as the API's, and the
    cost report's groups sum per function and fill the chart's hours."""
    ms = 1_790_000_000_123
    got = page.evaluate(
        """async (ms) => {
            const f = await import('/ui/assets/format.js');
            const phase = (name, start, end) => ({name, start: `2026-01-01T00:00:0${start}Z`,
                end: end === null ? null : `2026-01-01T00:00:0${end}Z`});
            const timeline = {accepted: '2026-01-01T00:00:00Z', dispatched: '2026-01-01T00:00:01Z',
                capacity_ready: '2026-01-01T00:00:03Z', started: null, finished: null,
                phases: [phase('queue', 0, 1), phase('capacity', 1, 3), phase('start', 3, null)]};
            // Through Kueue, as the gateway splits it (domain/wait_phases.py); ended while it waited.
            const kueue = {accepted: '2026-01-01T00:00:00Z', finished: '2026-01-01T00:00:09Z',
                phases: [phase('queue', 0, 1), phase('kueue', 1, 4), phase('capacity', 4, null)]};
            const item = (state, start) => ({state, durations: {time_to_start: start}});
            const group = (fn, hour, run, provisioning, capacity = 'spot') => ({function: fn,
                hour: `2026-01-01T${hour}:00:00Z`, capacity,
                node_seconds: {provisioning, idle_before_start: 0, run, idle_after: 0, warm_unused: 0},
                total_node_seconds: run + provisioning, usd: (run + provisioning) / 4});
            return {
                cursor: f.cursorBefore(ms),
                phases: f.phases(timeline, Date.parse('2026-01-01T00:00:10Z')).map(p => [p[0], p[2] - p[1]]),
                kueuePhases: f.phases(kueue, Date.parse('2026-01-01T00:00:10Z')).map(p => [p[0], p[2]-p[1]]),
                p95: f.percentile([...Array(100).keys()].map(i => i + 1), 95),
                stats: f.functionStats([item('succeeded', 1), item('failed', 3), item('running', 2),
                    item('queued', null)]),
                byFunction: f.costBy([group('b', '10', 1, 2), group('a', '10', 3, 0),
                    group('b', '11', 5, 1)], 'function')
                    .map(r => [r.key, r.node_seconds.provisioning, r.node_seconds.run, r.total, r.usd]),
                byCapacity: f.costBy([group('b', '10', 1, 2), group('a', '10', 3, 0, 'on-demand'),
                    group('b', '11', 5, 1)], 'capacity').map(r => [r.key, r.total, r.usd]),
                slots: f.hourSlots('2026-01-01T10:30:00Z', '2026-01-01T12:10:00Z')
                    .map(t => new Date(t).toISOString()),
                ticks: [f.ticks(7), f.ticks(1), f.ticks(0), f.ticks(23), f.ticks(0.3, 4, false)],
                series: f.series([['failed', '10:01:00', 2], ['succeeded', '10:02:00', 4],
                    ['queued', '10:07:00', null], ['timed_out', '09:59:59', 1]].map(([state, at, start]) =>
                    ({state, timeline: {accepted: `2026-01-01T${at}Z`}, durations: {time_to_start: start}})),
                    Date.parse('2026-01-01T10:00:00Z'), Date.parse('2026-01-01T10:10:00Z'), 5 * 60 * 1000)
                    .map(b => [b.invocations, b.failures, b.p95Start]),
                runs: [f.runs({command: ['python', 'w.py'], workdir: '/srv/fn', image: 'img:1'}, 'local'),
                    f.runs({command: ['python', 'w.py'], image: 'img:1'}, 'local'),
                    f.runs({command: ['python', 'w.py'], image: 'img:1'}, 'kubernetes')],
            };
        }""",
        ms,
    )
    first = new_invocation_id(ms * 1_000_000, random_bytes=bytes)  # all-zero random bits
    assert got["cursor"] == first
    assert new_invocation_id((ms - 1) * 1_000_000) < got["cursor"] < new_invocation_id(ms * 1_000_000)
    assert got["phases"] == [["queue", 1000], ["capacity", 2000], ["start", 7000]]
    assert got["kueuePhases"] == [["queue", 1000], ["kueue", 3000], ["capacity", 5000]]
    assert got["p95"] == 95
    assert got["stats"] == {"count": 4, "ended": 2, "successRate": 0.5, "p95Start": 3}
    assert got["byFunction"] == [["a", 0, 3, 3, 0.75], ["b", 3, 6, 9, 2.25]]
    assert got["byCapacity"] == [["on-demand", 3, 0.75], ["spot", 9, 2.25]]
    assert got["ticks"] == [[0, 2, 4, 6, 8], [0, 1], [0, 1], [0, 10, 20, 30], [0, 0.1, 0.2, 0.3]]
    # The one accepted before the range is left out; the queued one counts, with no start.
    assert got["series"] == [[2, 1, 4], [1, 0, None]]
    assert got["runs"] == [
        "python w.py  (in /srv/fn)",
        "python w.py  (in the gateway's working directory)",
        "python w.py  (in image img:1)",
    ]
    assert got["slots"] == [
        "2026-01-01T10:00:00.000Z",
        "2026-01-01T11:00:00.000Z",
        "2026-01-01T12:00:00.000Z",
    ]


def test_an_invoke_session_is_told_the_cost_page_needs_an_admin_token(
    page: Page, gateway: RunningServer
) -> None:
    """After the logout above: the same tab logs in with an invoke-scope token."""
    with gateway.client() as http:
        made = http.post("/v1/tokens", json={"name": "viewer", "scope": "invoke"})
        assert made.status_code == 201, made.text
    # A document of its own (a query, not only a hash): a hash change re-renders the login form
    # a moment later, and a token typed before that was lost with the old input (1 run in 4).
    page.goto(gateway.url + "/ui?as=viewer#/cost")
    expect(page.locator("#token")).to_be_visible()
    page.locator("#token").fill(made.json()["token"])
    page.keyboard.press("Enter")
    expect(page.locator("#who")).to_have_text("viewer (invoke)")
    expect(page.locator("#needs-admin")).to_contain_text("needs an admin token")
    expect(page.locator("#cost-table")).to_have_count(0)
    page.locator('nav a[data-page="invocations"]').click()
    expect(page.locator("#list-status")).to_be_visible()  # the rest of the console still works
    page.goto(gateway.url + "/ui#/functions/hello")  # an invoke token may invoke from the page
    expect(page.locator("#payload")).to_have_attribute("data-from", "example")
    page.locator("#invoke").click()
    expect(page.locator("#invoked a[data-id]")).to_be_visible(timeout=10_000)
    page.locator("#logout").click()
    expect(page.locator("#token")).to_be_visible()
