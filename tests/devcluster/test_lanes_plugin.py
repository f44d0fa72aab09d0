"""The dev-cluster plugin's lanes in a real parallel run (pytest-xdist, as scripts/test runs the
cluster half): a lane's modules run in one worker on a cluster of their own, the unmarked ones
share one cluster whichever worker runs them, and the run's controller stops every cluster by PID
at its end; without xdist all lanes are one cluster. `cluster_lane` on a test, not its module, is
refused.

The inner runs start a stand-in for the cluster (a real sleeping process, recorded as a dev
cluster records its own) so that they take seconds: the lock, the attach and the stop by PID are
the plugin's own."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from elasticityops.devcluster import procs
from elasticityops.devcluster.procs import ProcessRecord
from elasticityops.devcluster.pytest_plugin import lane_totals

CONFTEST = textwrap.dedent(
    """
    import time
    from pathlib import Path

    import elasticityops.devcluster.pytest_plugin as plugin
    from elasticityops.devcluster import procs
    from elasticityops.devcluster.cluster import ClusterState, DevCluster, _save
    from elasticityops.devcluster.components import Layout, Ports

    pytest_plugins = ["elasticityops.devcluster.pytest_plugin"]


    def _start(state_dir: Path, *, kueue: bool = False) -> DevCluster:
        lay = Layout(state_dir)
        rec = procs.start("sleeper", ["sleep", "300"], lay.logs / "sleeper.log")
        ports = Ports(1, 2, 3, 4, 5, 6)
        state = ClusterState(state_dir, "https://127.0.0.1:1", ports, state_dir, (rec,), 0.0)
        _save(lay, state)
        time.sleep(0.5)  # a start takes a while: a second worker waits for it on the lock
        return DevCluster(state)


    plugin._start = _start
    plugin.stuck_pod_report = lambda *args, **kwargs: ""  # no API server behind the stand-in
    """
)

RECORD = textwrap.dedent(
    """
    import json
    import os
    import time
    from pathlib import Path

    import pytest

    {mark}


    @pytest.mark.cluster
    @pytest.mark.parametrize("i", range({count}))
    def test_records_where_it_ran(dev_cluster, i):
        time.sleep(0.3)
        record = {{
            "test": "{module}-" + str(i),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "state_dir": str(dev_cluster.state_dir),
            "process": dev_cluster.state.processes[0].to_json(),
        }}
        out = Path(os.environ["RECORDS"]) / ("{module}-" + str(i) + ".json")
        out.write_text(json.dumps(record))
    """
)


def _write_suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nmarkers = ["cluster: needs the dev cluster"]\n')
    alone = 'pytestmark = pytest.mark.cluster_lane("alone")'
    pytester.makepyfile(
        test_alone=RECORD.format(mark=alone, count=3, module="alone"),
        test_shared_a=RECORD.format(mark="", count=2, module="a"),
        test_shared_b=RECORD.format(mark="", count=2, module="b"),
    )


def _records(path: Path) -> dict[str, dict[str, object]]:
    return {p.stem: json.loads(p.read_text()) for p in path.glob("*.json")}


def _process(record: dict[str, object]) -> ProcessRecord:
    return ProcessRecord.from_json(record["process"])  # type: ignore[arg-type]


def test_in_a_parallel_run_a_lane_has_one_worker_and_a_cluster_of_its_own(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write_suite(pytester)
    monkeypatch.setenv("RECORDS", str(tmp_path))
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "3", "--dist", "loadgroup", timeout=120)
    result.assert_outcomes(passed=7)
    seen = _records(tmp_path)
    alone = [r for name, r in seen.items() if name.startswith("alone")]
    shared = [r for name, r in seen.items() if not name.startswith("alone")]
    assert len({r["worker"] for r in alone}) == 1, alone  # one after another, in one worker
    assert len({r["state_dir"] for r in alone}) == 1
    assert len({r["state_dir"] for r in shared}) == 1  # one cluster, whichever worker ran them
    assert {r["state_dir"] for r in alone} != {r["state_dir"] for r in shared}
    assert len({r["worker"] for r in seen.values()}) >= 2, seen  # they did run side by side
    started = {_process(r).pid: _process(r) for r in seen.values()}
    assert len(started) == 2  # one start per lane
    assert not any(procs.is_alive(rec) for rec in started.values())  # the controller stopped them
    # The summary says each lane's seconds: a lane's sum is about its wall time.
    out = result.stdout.str()
    assert re.search(r"cluster lanes, seconds of their tests \(tests\): .*alone \d+ s \(3\)", out), out
    assert re.search(r"cluster lanes, .*shared \d+ s \(4\)", out), out


def test_without_xdist_every_lane_is_the_sessions_one_cluster(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write_suite(pytester)
    monkeypatch.setenv("RECORDS", str(tmp_path))
    result = pytester.runpytest_subprocess(timeout=120)
    result.assert_outcomes(passed=7)
    seen = _records(tmp_path)
    assert len({r["state_dir"] for r in seen.values()}) == 1
    [rec] = {_process(r).pid: _process(r) for r in seen.values()}.values()
    assert not procs.is_alive(rec)  # stopped at the session's end


def test_a_lane_on_a_test_instead_of_its_module_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_misplaced="""
        import pytest

        @pytest.mark.cluster_lane("alone")
        def test_one(dev_cluster):
            pass
        """
    )
    result = pytester.runpytest_subprocess(timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_one: cluster_lane goes on the module (pytestmark)*"])


def test_lane_totals_sum_each_lanes_phases_and_count_its_tests() -> None:
    def rep(nodeid: str, duration: float, cluster: bool = True) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, duration=duration, keywords={"cluster": 1} if cluster else {})

    reports = [
        rep("t.py::a@cluster-lane-nodes", 2.0),
        rep("t.py::a@cluster-lane-nodes", 60.0),  # its call after its setup: one test
        rep("t.py::b[x@y]@cluster-lane-nodes", 30.0),
        rep("s.py::c", 10.0),
        rep("s.py::d", 5.5),
        rep("u.py::e", 99.0, cluster=False),  # not a cluster test: not counted
        SimpleNamespace(nodeid="", duration=None, keywords={}),  # a collect report
    ]
    totals = lane_totals(reports)
    assert totals == {"nodes": (92.0, 2), "shared": (15.5, 2)}
    assert list(totals) == ["nodes", "shared"]  # the longest lane first
