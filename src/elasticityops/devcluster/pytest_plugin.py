"""pytest fixtures on top of the dev cluster: `dev_cluster` (per module: the cluster of the module's
lane) and `dev_namespace`; and, for the chart's tests, `helm_binary` and `servicemonitor_crd`
(the operator's own CRD), session.

Lanes (`pytestmark = pytest.mark.cluster_lane("NAME")` on a module; docs/testing.md): in a
parallel run (`pytest -n N --dist loadgroup`, as scripts/test runs the cluster half) the modules
of one lane run one after another in one worker, on a dev cluster of that lane alone; unmarked
modules share the lane `shared`, one cluster with a namespace per test, tests side by side. Each
lane's cluster is started by the first worker that needs it and stopped by the run's controller
(devcluster/pool.py). Without xdist every lane is one cluster for the session, as before, but
the lane `kueue`, whose cluster also runs Kueue (`KUEUE_LANE`).

Enable with `pytest_plugins = ["elasticityops.devcluster.pytest_plugin"]` (tests/conftest.py).
Tests that use the cluster are marked `@pytest.mark.cluster`. The binaries must have been
built (`scripts/build-devcluster`, which CI runs first); if they are missing the fixture FAILS
the test rather than skipping it. Set EOPS_DEV_CLUSTER_BUILD=1 to let the fixture build them
(a cold build takes ~25 minutes on 2 cores, longer than a test timeout).

Every lane's cluster runs upstream's cluster-autoscaler (kwok provider) with the same fast
knobs: baseline 2, max_nodes 50, scan_interval 2 s, provision_delay fixed:3, driver_delay
fixed:2, scale_down_after 10 s, max_node_provision_time 120 s, node-group back-off 60 s doubling
to 120 s. Its API server differs from upstream's in three flags, so that faults are common in
every cluster test (`FAULTY_SERVER`): Job watches are served from etcd, which it compacts every
10 s (a Job watch resuming after a quiet spell is answered 410 Gone and relists), and a request
gets 10 s (while etcd is away, `DevCluster.restart_etcd`, writes are answered 504). Upstream
still waits its fixed 30 s before it scales up for a pending GPU pod. Tests that change the
simulated cloud's knobs (baseline, delays, stockout zones) use `dev_cluster.knobs(...)`, which
restores them afterwards, and belong in a lane; the autoscaler's own flags are fixed for the
cluster (a test that needs others starts its own cluster).

After each test that uses `dev_cluster`, the plugin fails the test if a pod is left bound to a
Ready kwok-managed node and Pending past EOPS_DEV_CLUSTER_STUCK_AFTER seconds (default 60;
issue 14, devcluster/stuck.py): pods bound a moment ago get their own bound, polled at most
that long plus a little. One list call when nothing is bound-but-Pending. Never re-kicks a pod.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from elasticityops.devcluster.config import AutoscalerSettings

TEST_KNOBS = AutoscalerSettings(
    baseline=2,
    max_nodes=50,
    scan_interval=2.0,
    provision_delay="fixed:3",
    driver_delay="fixed:2",
    scale_down_after=10.0,
    max_scale_down_parallelism=10,
    max_node_provision_time=120.0,
    # A stocked-out zone backs its node groups off; at upstream's 300 s the next test that wants
    # that GPU type waited it out (the headroom test after the spillover test: ~4 minutes).
    backoff_initial=60.0,
    backoff_max=120.0,
    seed=1,
)


FAULTY_SERVER: dict[str, Any] = {
    # Jobs' watches come from etcd, which the API server compacts every 10 s: a Job watch that
    # resumes after a quiet spell gets a real 410 Gone and relists, in every cluster test.
    "etcd_compaction_s": 10,
    "uncached_watches": ("jobs.batch",),
    # While etcd is away (DevCluster.restart_etcd) a write waits this long, then is answered 504.
    "request_timeout_s": 10,
}
"""How the session's API server differs from upstream's defaults, so that its faults are common."""


class DevClusterFixture:
    """What the `dev_cluster` fixture yields; wraps `cluster.DevCluster`.

    Attributes and methods: `kubeconfig_path`, `server`, `state_dir`, `api()` (JSON client),
    `kubectl(*args)`, `set_baseline(n)`, `add_baseline_nodes(k)`, `remove_baseline_nodes(k)`,
    `configure_cloud(**knobs)`, `knobs(**knobs)` (context manager that restores),
    `autoscaler_settings`, `autoscaler_status()` (upstream's status text), `cloud_status()`,
    `node_counts()`, `stop()`.
    """

    def __init__(self, cluster: Any) -> None:
        from elasticityops.devcluster.cluster import DevCluster

        self._cluster: DevCluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    @contextlib.contextmanager
    def knobs(self, **knobs: Any) -> Iterator[AutoscalerSettings]:
        before = self._cluster.autoscaler_settings
        try:
            yield self._cluster.configure_cloud(**knobs)
        finally:
            # Restore what was changed but the baseline, which set_baseline() manages (it waits).
            restore = {k: v for k, v in asdict(before).items() if k in knobs}
            baseline = restore.pop("baseline", before.baseline)
            self._cluster.configure_cloud(**restore)
            if self._cluster.autoscaler_settings.baseline != baseline:
                self._cluster.set_baseline(baseline)

    def stop(self) -> list[str]:
        stopped: list[str] = self._cluster.stop()
        return stopped


def stuck_after() -> float:
    """EOPS_DEV_CLUSTER_STUCK_AFTER (seconds, default 60): the bound of the stuck-pod guard."""
    from elasticityops.devcluster.stuck import GUARD_BOUND_S

    value = os.environ.get("EOPS_DEV_CLUSTER_STUCK_AFTER", f"{GUARD_BOUND_S:g}")
    try:
        return float(value)
    except ValueError:
        raise pytest.UsageError(f"EOPS_DEV_CLUSTER_STUCK_AFTER={value}: expected seconds") from None


def stuck_pod_report(cluster: Any, bound_seconds: float, cap_seconds: float | None = None) -> str:
    """Empty when no pod stays bound-but-Pending past `bound_seconds` on the cluster; else the
    failure text naming each pod. What the guard after each cluster test runs."""
    from elasticityops.devcluster.stuck import list_bound_pending, settle

    cap = bound_seconds + 5.0 if cap_seconds is None else cap_seconds
    with cluster.api() as api:
        stuck = settle(lambda: list_bound_pending(api), bound_seconds, cap)
    if not stuck:
        return ""
    lines = "\n".join(f"  {p}" for p in stuck)
    return (
        f"{len(stuck)} pod(s) bound to a Ready kwok-managed node stayed Pending longer than "
        f"{bound_seconds:g}s (issue 14; not re-kicked):\n{lines}"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # In the call phase, before fixture teardown deletes the test's namespace (and its pods).
    cluster = getattr(item, "funcargs", {}).get("dev_cluster")
    if cluster is None:
        return (yield)
    try:
        result = yield
    except BaseException as exc:
        if isinstance(exc, Exception):  # the test failed: say if a stuck pod may be why
            with contextlib.suppress(Exception):
                report = stuck_pod_report(cluster, stuck_after(), cap_seconds=0.0)
                if report:
                    exc.add_note(report)
        raise
    report = stuck_pod_report(cluster, stuck_after())
    if report:
        pytest.fail(report, pytrace=False)
    return result


LANE_MARKER = "cluster_lane"
"""`pytestmark = pytest.mark.cluster_lane("NAME")` on a module: its tests change or read what the
whole cluster shares, so in a parallel run (pytest-xdist, `--dist loadgroup`) they run one after
another in one process, with the other modules of lane NAME, on a dev cluster of that lane alone.
Unmarked modules share the lane `shared`: one cluster, a namespace per test, tests side by side.
Without xdist every lane is the session's one cluster."""


def _lane(node: pytest.Item | pytest.Collector) -> str:
    from elasticityops.devcluster.pool import SHARED_LANE, check_lane

    mark = node.get_closest_marker(LANE_MARKER)
    if mark is None:
        return SHARED_LANE
    if len(mark.args) != 1 or not isinstance(mark.args[0], str):
        raise pytest.UsageError(f"{node.nodeid}: cluster_lane takes one name, e.g. cluster_lane('nodes')")
    return check_lane(mark.args[0])


def _pool_of(config: pytest.Config) -> Path | None:
    """The run's pool directory in an xdist worker (handed over by the controller), else None."""
    pool = getattr(config, "workerinput", {}).get("eops_dev_cluster_pool")
    return None if pool is None else Path(pool)


def _is_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("dsession") and not hasattr(config, "workerinput")


def _controller_pool(config: pytest.Config) -> Path:
    return Path(config._tmp_path_factory.getbasetemp()) / "dev-clusters"  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{LANE_MARKER}(name): on a module; in a parallel run its tests run one after another, "
        "with the other modules of lane NAME, on a dev cluster of that lane alone",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    # xdist's controller, for each worker it starts: where the run's clusters live.
    node.workerinput["eops_dev_cluster_pool"] = str(_controller_pool(node.config))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Before xdist's own hook, which turns xdist_group marks into scheduling units.
    from elasticityops.devcluster.pool import SHARED_LANE

    for item in items:
        lane = _lane(item)
        module = item.getparent(pytest.Module)
        if module is not None and _lane(module) != lane:
            # The dev_cluster fixture is per module: one module, one lane.
            raise pytest.UsageError(f"{item.nodeid}: cluster_lane goes on the module (pytestmark)")
        if lane != SHARED_LANE:
            item.add_marker(pytest.mark.xdist_group(f"cluster-lane-{lane}"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _is_controller(session.config):
        from elasticityops.devcluster.pool import stop_all

        stop_all(_controller_pool(session.config))


_GROUP_SUFFIX = "@cluster-lane-"


def lane_totals(reports: list[Any]) -> dict[str, tuple[float, int]]:
    """Seconds (setup, call and teardown summed) and tests per lane, from a parallel run's
    reports of cluster tests: a lane's tests run one after another, so its sum is about its
    wall time, and the longest lane is the least the cluster half can take."""
    from elasticityops.devcluster.pool import SHARED_LANE

    seconds: dict[str, float] = {}
    tests: dict[str, set[str]] = {}
    for rep in reports:
        nodeid, duration = getattr(rep, "nodeid", None), getattr(rep, "duration", None)
        if not nodeid or duration is None or "cluster" not in getattr(rep, "keywords", {}):
            continue
        lane = nodeid.rsplit(_GROUP_SUFFIX, 1)[1] if _GROUP_SUFFIX in nodeid else SHARED_LANE
        seconds[lane] = seconds.get(lane, 0.0) + float(duration)
        tests.setdefault(lane, set()).add(nodeid)
    return {lane: (seconds[lane], len(tests[lane])) for lane in sorted(seconds, key=lambda n: -seconds[n])}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _is_controller(config):
        return
    reports = [r for group in terminalreporter.stats.values() for r in group]
    totals = lane_totals(reports)
    if totals:
        shown = ", ".join(f"{lane} {secs:.0f} s ({count})" for lane, (secs, count) in totals.items())
        terminalreporter.write_line(
            f"cluster lanes, seconds of their tests (tests): {shown}; "
            "a lane runs its tests one after another, `shared` side by side"
        )


KUEUE_LANE = "kueue"
"""The lane whose cluster also runs Kueue (`up --kueue`): Kueue's webhook sees every Job created,
so the other lanes' clusters run without it."""


def _start(state_dir: Path, *, kueue: bool = False) -> Any:
    from elasticityops.devcluster.build import ensure_built
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.config import ClusterConfig
    from elasticityops.devcluster.errors import DevClusterError

    allow_build = os.environ.get("EOPS_DEV_CLUSTER_BUILD", "") == "1"
    try:
        tc = ensure_built(allow_build=allow_build, autoscaler="required", kueue=kueue)
    except DevClusterError as exc:
        raise DevClusterError(f"dev cluster binaries unavailable: {exc}") from None
    cfg = ClusterConfig(state_dir=state_dir, autoscaler=TEST_KNOBS, kueue=kueue, **FAULTY_SERVER)
    try:
        return DevCluster.start(cfg, tc)
    except DevClusterError as exc:
        raise DevClusterError(f"dev cluster did not start: {exc}") from None


class _Lanes:
    """The clusters of this process, by lane: in an xdist worker each lane's from the run's pool
    (started by whichever worker needed it first, stopped by the controller); otherwise one
    cluster for every lane, started on first use and stopped at the session's end."""

    def __init__(self, pool: Path | None, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._pool = pool
        self._tmp = tmp_path_factory
        self._clusters: dict[str, DevClusterFixture] = {}
        self._own: list[Any] = []

    def get(self, lane: str) -> DevClusterFixture:
        from elasticityops.devcluster.errors import DevClusterError
        from elasticityops.devcluster.pool import SHARED_LANE, acquire

        kueue = lane == KUEUE_LANE
        key = lane if self._pool is not None or kueue else SHARED_LANE
        if key not in self._clusters:
            try:
                if self._pool is not None:
                    cluster = acquire(self._pool, lane, functools.partial(_start, kueue=kueue))
                else:
                    cluster = _start(self._tmp.mktemp("dev-cluster"), kueue=kueue)
                    self._own.append(cluster)
                    # Belt and braces: if the session dies before fixture teardown, still stop by PID.
                    atexit.register(cluster.stop)
            except DevClusterError as exc:
                pytest.fail(str(exc), pytrace=False)
            self._clusters[key] = DevClusterFixture(cluster)
        return self._clusters[key]

    def close(self) -> None:
        for cluster in self._own:
            cluster.stop()
            atexit.unregister(cluster.stop)


@pytest.fixture(scope="session")
def dev_cluster_lanes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Lanes]:
    lanes = _Lanes(_pool_of(request.config), tmp_path_factory)
    try:
        yield lanes
    finally:
        lanes.close()


@pytest.fixture(scope="module")
def dev_cluster(request: pytest.FixtureRequest, dev_cluster_lanes: _Lanes) -> DevClusterFixture:
    """The dev cluster of the module's lane (`cluster_lane`; `shared` where unmarked)."""
    return dev_cluster_lanes.get(_lane(request.node))


@pytest.fixture(scope="session")
def helm_binary() -> str:
    """The pinned helm CLI (`scripts/build-devcluster` builds it; EOPS_DEV_CLUSTER_BUILD=1 lets the
    fixture build it, ~3 minutes cold). Missing: the test FAILS, as for the cluster."""
    from elasticityops.devcluster.build import ensure_helm
    from elasticityops.devcluster.errors import DevClusterError

    try:
        return str(ensure_helm(allow_build=os.environ.get("EOPS_DEV_CLUSTER_BUILD", "") == "1").binary)
    except DevClusterError as exc:
        pytest.fail(f"helm unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def servicemonitor_crd() -> Path:
    """The Prometheus operator's own ServiceMonitor CRD of the pinned release (`scripts/build-devcluster`
    fetches it from the Go module proxy; EOPS_DEV_CLUSTER_BUILD=1 lets the fixture fetch it).
    Missing: the test FAILS, as for helm."""
    from elasticityops.devcluster.build import ensure_operator_crds
    from elasticityops.devcluster.errors import DevClusterError

    try:
        allow = os.environ.get("EOPS_DEV_CLUSTER_BUILD", "") == "1"
        return ensure_operator_crds(allow_build=allow).servicemonitor
    except DevClusterError as exc:
        pytest.fail(f"ServiceMonitor CRD unavailable: {exc}", pytrace=False)


@pytest.fixture
def dev_namespace(dev_cluster: DevClusterFixture) -> Iterator[str]:
    """A fresh namespace per test (deleted afterwards), so tests sharing the cluster do not collide."""
    name = f"t-{secrets.token_hex(4)}"
    with dev_cluster.api() as api:
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        yield name
        api.delete(f"/api/v1/namespaces/{name}")
