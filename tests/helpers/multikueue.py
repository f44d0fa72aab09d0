"""The MultiKueue set of the cluster tests (`eops dev-cluster up --multikueue` with two workers, the
real Kueue v0.17.0): one per session, started by the first test of the `multikueue` lane that
asks for it and stopped by PID at the session's end (or at exit, should the session die first)."""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator

import pytest

from elasticityops.devcluster.cluster_set import ClusterSet, down_set, up_set


@pytest.fixture(scope="session")
def multikueue_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    from elasticityops.cli.devcluster_set import set_objects
    from elasticityops.devcluster.build import ensure_built
    from elasticityops.devcluster.config import ClusterConfig
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.pytest_plugin import TEST_KNOBS

    root = tmp_path_factory.mktemp("multikueue")
    allow_build = os.environ.get("EOPS_DEV_CLUSTER_BUILD", "") == "1"
    atexit.register(down_set, root)
    try:
        tc = ensure_built(allow_build=allow_build, autoscaler="required", kueue=True)
        cfg = ClusterConfig(state_dir=root, autoscaler=TEST_KNOBS)
        started = up_set(root, cfg, 2, set_objects(2, TEST_KNOBS.max_nodes), tc)
    except DevClusterError as exc:
        pytest.fail(f"the MultiKueue set did not start: {exc}", pytrace=False)
    try:
        yield started
    finally:
        down_set(root)
        atexit.unregister(down_set)
