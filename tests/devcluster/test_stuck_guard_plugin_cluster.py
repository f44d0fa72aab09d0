"""The stuck-pod guard as the plugin runs it: an inner pytest session of its own (a subprocess,
with a dev cluster of its own) whose test leaves a pod kwok never starts fails, naming the pod;
its other test, without the cluster, is not guarded."""

from __future__ import annotations

import re
import textwrap

import pytest

from elasticityops.devcluster.paths import cache_root

pytestmark = pytest.mark.cluster
CACHE_DIR = cache_root().parent  # read at import, before pytester moves HOME


INNER = textwrap.dedent(
    """
    import secrets

    import pytest


    @pytest.mark.cluster
    def test_leaves_a_pod_kwok_never_starts(dev_cluster, dev_namespace):
        ns, name = dev_namespace, "left-" + secrets.token_hex(3)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"schedulerName": "eops-nobody", "containers": [{"name": "c", "image": "pause"}]},
        }
        with dev_cluster.api() as api:
            nodes, _ = api.list("/api/v1/nodes", {"labelSelector": "eops.dev/role=baseline"})
            api.create(f"/api/v1/namespaces/{ns}/pods", pod)
            api.patch(
                f"/api/v1/namespaces/{ns}/pods/{name}/status",
                {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            )
            target = {"apiVersion": "v1", "kind": "Node", "name": nodes[0]["metadata"]["name"]}
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": target}
            api.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
        print("LEFT", ns + "/" + name)


    def test_without_the_cluster_is_not_guarded():
        pass
    """
)


def test_the_plugin_fails_a_test_that_leaves_a_stuck_pod(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its own session and cluster (a subprocess): the guard is the plugin's, run as CI runs it.
    pytester.makeconftest('pytest_plugins = ["elasticityops.devcluster.pytest_plugin"]\n')
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nmarkers = ["cluster: needs the dev cluster"]\n')
    pytester.makepyfile(test_inner=INNER)
    monkeypatch.setenv("EOPS_DEV_CLUSTER_STUCK_AFTER", "2")
    # pytester points HOME at its temporary dir: keep using the built binaries' cache.
    monkeypatch.setenv("EOPS_CACHE_DIR", str(CACHE_DIR))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=240)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "stayed Pending longer than 2s" in out, out
    assert "issue 14" in out
    left = re.search(r"LEFT (\S+)", out)
    assert left, out
    assert f"{left.group(1)} on gke-eops-baseline-t4-" in out
