"""How the Prometheus operator's ServiceMonitor CRD is fetched and cached: a stamp of its own,
reused only while its marker names the pinned version and source and the file still has the
sha256 it records; missing, it is an error that says what to run (and so is the fixture)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from elasticityops.devcluster import build, paths
from elasticityops.devcluster.build import BuildEvent, ensure_operator_crds, store_servicemonitor_crd
from elasticityops.devcluster.errors import BinariesMissingError, BuildError
from elasticityops.devcluster.paths import OperatorCrds, current_operator_crds
from elasticityops.devcluster.versions import (
    PROMETHEUS_OPERATOR_MODULE,
    PROMETHEUS_OPERATOR_VERSION,
    SERVICEMONITOR_CRD_FILE,
)

CRD_TEXT = b"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("EOPS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EOPS_DEV_CLUSTER_BUILD", raising=False)
    return tmp_path


def _stored(cache: Path) -> OperatorCrds:
    crds = current_operator_crds()
    store_servicemonitor_crd(crds, CRD_TEXT, module_sum="h1:test")
    return crds


def _no_go(module: str, version: str, cwd: Path) -> dict[str, str]:
    raise AssertionError(f"go mod download {module}@{version} run for a complete stamp")


def test_the_crd_has_a_stamp_of_its_own(cache: Path) -> None:
    crds = current_operator_crds()
    assert crds.root.parent == cache / "devcluster"
    assert crds.root.name.startswith(f"prometheus-operator{PROMETHEUS_OPERATOR_VERSION}-")
    assert crds.root not in (paths.current_helm().root, paths.current_toolchain().root)
    assert crds.servicemonitor == crds.root / "crd" / "monitoring.coreos.com_servicemonitors.yaml"
    assert not crds.is_complete()
    with pytest.raises(BinariesMissingError, match="run `eops dev-cluster build`"):
        ensure_operator_crds(allow_build=False)


def test_a_stored_crd_is_complete_and_reused_without_go(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crds = _stored(cache)
    stamp = json.loads(crds.marker.read_text())
    assert stamp["version"] == PROMETHEUS_OPERATOR_VERSION
    assert (
        stamp["source"]
        == f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION}/{SERVICEMONITOR_CRD_FILE}"
    )
    assert crds.is_complete()
    monkeypatch.setattr(build, "download_module", _no_go)
    events: list[BuildEvent] = []
    assert ensure_operator_crds(allow_build=False, progress=events.append) == crds
    assert [e.kind for e in events] == ["skipped"]


@pytest.mark.parametrize("field", ["version", "source"])
def test_a_stamp_of_another_version_counts_as_missing(cache: Path, field: str) -> None:
    crds = _stored(cache)
    stamp = json.loads(crds.marker.read_text())
    stamp[field] = stamp[field].replace(PROMETHEUS_OPERATOR_VERSION, "v0.84.0")
    crds.marker.write_text(json.dumps(stamp))
    assert not crds.is_complete()
    with pytest.raises(BinariesMissingError):
        ensure_operator_crds(allow_build=False)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda crd: crd.write_bytes(CRD_TEXT + b"  x: 1\n"), id="changed"),
        pytest.param(lambda crd: crd.write_bytes(CRD_TEXT[:10]), id="cut-short"),
        pytest.param(lambda crd: crd.unlink(), id="deleted"),
    ],
)
def test_a_file_that_does_not_match_the_stamps_sha256_counts_as_missing(
    cache: Path, damage: Callable[[Path], object]
) -> None:
    crds = _stored(cache)
    damage(crds.servicemonitor)
    assert not crds.is_complete()


@pytest.mark.parametrize("marker", ["", "not json", "[]", '{"version": "v0.85.0"}'])
def test_a_missing_or_unreadable_marker_counts_as_missing(cache: Path, marker: str) -> None:
    crds = _stored(cache)
    if marker:
        crds.marker.write_text(marker)
    else:
        crds.marker.unlink()
    assert not crds.is_complete()


def _fake_module(root: Path, with_file: bool = True) -> Path:
    crd = root / SERVICEMONITOR_CRD_FILE
    crd.parent.mkdir(parents=True)
    if with_file:
        crd.write_bytes(CRD_TEXT)
        crd.chmod(0o444)  # as in the module cache
    return root


def test_the_fetch_copies_the_file_out_of_the_module_and_stamps_it(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _fake_module(tmp_path / "mod")
    asked: list[tuple[str, str, Path]] = []

    def download(name: str, version: str, cwd: Path) -> dict[str, str]:
        asked.append((name, version, cwd))
        assert not (cwd / "go.mod").exists()
        return {"Dir": str(module), "Sum": "h1:fake="}

    monkeypatch.setattr(build, "download_module", download)
    events: list[BuildEvent] = []
    crds = ensure_operator_crds(progress=events.append)
    assert [(m, v) for m, v, _ in asked] == [(PROMETHEUS_OPERATOR_MODULE, PROMETHEUS_OPERATOR_VERSION)]
    assert [e.kind for e in events] == ["start", "linked"]
    assert crds.servicemonitor.read_bytes() == CRD_TEXT
    assert crds.is_complete()
    assert json.loads(crds.marker.read_text())["module_sum"] == "h1:fake="
    # A damaged copy is fetched again, not reused.
    crds.servicemonitor.write_bytes(b"damaged")
    ensure_operator_crds()
    assert len(asked) == 2
    assert crds.servicemonitor.read_bytes() == CRD_TEXT


def test_a_module_without_the_file_is_a_build_error(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _fake_module(tmp_path / "mod", with_file=False)
    monkeypatch.setattr(build, "download_module", lambda *_: {"Dir": str(module), "Sum": ""})
    with pytest.raises(BuildError, match=SERVICEMONITOR_CRD_FILE):
        ensure_operator_crds()
    assert not current_operator_crds().marker.exists()


INNER = """
def test_path(servicemonitor_crd):
    print("CRD AT", servicemonitor_crd)
    assert servicemonitor_crd.is_file()
"""


def _run_fixture(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makeconftest('pytest_plugins = ["elasticityops.devcluster.pytest_plugin"]\n')
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-s")


def test_the_fixture_gives_the_stamped_crd(cache: Path, pytester: pytest.Pytester) -> None:
    crds = _stored(cache)
    result = _run_fixture(pytester)
    result.assert_outcomes(passed=1)
    assert f"CRD AT {crds.servicemonitor}\n" in result.stdout.str()


def test_the_fixture_fails_naming_the_build_when_the_crd_is_missing(
    cache: Path, pytester: pytest.Pytester
) -> None:
    result = _run_fixture(pytester)
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "ServiceMonitor CRD unavailable" in out, out
    assert "run `eops dev-cluster build`" in out
    assert not current_operator_crds().marker.exists()
