"""`eops serve --backend kubernetes` refuses to start without its PriorityClasses, naming the fix.
The test deletes one for a moment, which every Job on the cluster names: in a parallel run it runs
in the lane `faults`, on a cluster no other lane's tests use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.preflight import PRIORITY_CLASS_PATH

from .cluster_support import start_k8s_gateway

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("faults")]


def test_serve_exits_naming_the_fix_when_one_is_missing(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    gone = next(pc for pc in priority_classes() if pc["metadata"]["name"] == "eops-normal")
    with dev_cluster.api() as api:
        api.delete(f"{PRIORITY_CLASS_PATH}/eops-normal")
        try:
            with pytest.raises(RuntimeError, match="exited with 2") as failed:
                start_k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw").stop()
            assert "no PriorityClass eops-normal" in str(failed.value)
            assert "eops dev-cluster up" in str(failed.value)
        finally:
            api.create("/apis/scheduling.k8s.io/v1/priorityclasses", gone)
    # With all of them there it starts.
    start_k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw2").stop()
