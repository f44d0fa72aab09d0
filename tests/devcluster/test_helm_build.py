"""How helm is built and cached: its stamp is its own (a new helm never rebuilds the control
plane), its ldflags are helm's Makefile's, and a missing build is an error that says what to run."""

from __future__ import annotations

from pathlib import Path

import pytest

from elasticityops.devcluster import paths
from elasticityops.devcluster.build import ensure_helm
from elasticityops.devcluster.errors import BinariesMissingError
from elasticityops.devcluster.versions import HELM_VERSION, helm_ldflags


def test_helm_is_built_with_the_kubernetes_version_of_its_client_go() -> None:
    client_go = paths.helm_client_go()
    assert client_go.startswith("v0.")
    flags = helm_ldflags(client_go)
    minor = client_go.split(".")[1]
    assert f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={minor}" in flags
    assert f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor={minor}" in flags
    assert f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}" in flags


def test_helm_has_a_stamp_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EOPS_CACHE_DIR", str(tmp_path))
    helm = paths.current_helm()
    assert helm.root.parent == tmp_path / "devcluster"
    assert helm.root.name.startswith(f"helm{HELM_VERSION}-")
    assert helm.root != paths.current_toolchain().root
    with pytest.raises(BinariesMissingError, match="run `eops dev-cluster build`"):
        ensure_helm(allow_build=False)
