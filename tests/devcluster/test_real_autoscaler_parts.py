"""The real autoscaler's source checks, stamp, kwok provider config and command line (no cluster)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from elasticityops.devcluster import autoscaler_source, components
from elasticityops.devcluster.autoscaler_source import (
    DEFAULT_TARBALL,
    SOURCE_ENV,
    checked_tarball,
    find_source,
)
from elasticityops.devcluster.build import BuildEvent, _apply_patches, _extract, ensure_autoscaler
from elasticityops.devcluster.components import Layout, Ports
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import BinariesMissingError, BuildError
from elasticityops.devcluster.install import crd_documents
from elasticityops.devcluster.kwok_provider import (
    MAX_COUNT,
    NOT_READY_TAINT,
    configmaps,
    group_names,
    provider_config,
    templates,
)
from elasticityops.devcluster.nodes import GPU_TAINT, POOL_LABEL, ZONES, gpu_node
from elasticityops.devcluster.paths import AutoscalerBuild

GOMOD = "module k8s.io/autoscaler/cluster-autoscaler\n\ngo 1.26.0\n"


def _tarball(tmp_path: Path, name: str = "ca-src.tar.gz", sums: str | None = None) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, text in {
            "cluster-autoscaler/go.mod": GOMOD,
            "cluster-autoscaler/main.go": "package main\n",
            "cluster-autoscaler/apis/config/crd/x.yaml": "kind: CustomResourceDefinition\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / name
    path.write_bytes(buf.getvalue())
    digest = hashlib.sha256(buf.getvalue()).hexdigest()
    (tmp_path / "SHA256SUMS").write_text(sums if sums is not None else f"{digest}  {name}\n")
    return path


def test_the_pinned_tarball_matches_its_checksum() -> None:
    if not DEFAULT_TARBALL.is_file():
        pytest.skip(f"{DEFAULT_TARBALL} not beside this checkout")
    src = find_source({})
    assert src.is_tarball
    assert src.path == DEFAULT_TARBALL
    assert src.stamp.startswith("cluster-autoscaler1.36.1-")


def test_a_tarball_with_the_wrong_checksum_is_refused(tmp_path: Path) -> None:
    path = _tarball(tmp_path, sums=f"{'0' * 64}  ca-src.tar.gz\n")
    with pytest.raises(BuildError, match="checksum mismatch"):
        checked_tarball(path)
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  other.tar.gz\n")
    with pytest.raises(BuildError, match=r"no checksum for ca-src\.tar\.gz"):
        checked_tarball(path)


def test_the_source_setting_names_a_tarball_or_a_clone(tmp_path: Path) -> None:
    tar = _tarball(tmp_path)
    assert find_source({SOURCE_ENV: str(tar)}).is_tarball
    clone = tmp_path / "autoscaler"
    mod = clone / "cluster-autoscaler"
    mod.mkdir(parents=True)
    (mod / "go.mod").write_text(GOMOD)
    (mod / "go.sum").write_text("")
    (mod / "main.go").write_text("package main\n")
    (mod / "main_test.go").write_text("package main\n")
    # The repository root or its cluster-autoscaler/ directory, either way the same module.
    a, b = find_source({SOURCE_ENV: str(clone)}), find_source({SOURCE_ENV: str(mod)})
    assert a == b
    assert not a.is_tarball
    assert a.path == mod
    # The stamp follows the source: a changed .go file is another build, a test file is not.
    (mod / "main_test.go").write_text("package main // changed\n")
    assert find_source({SOURCE_ENV: str(mod)}).stamp == a.stamp
    (mod / "main.go").write_text("package main // changed\n")
    assert find_source({SOURCE_ENV: str(mod)}).stamp != a.stamp
    with pytest.raises(BuildError, match=r"no k8s\.io/autoscaler/cluster-autoscaler module"):
        find_source({SOURCE_ENV: str(tmp_path)})
    with pytest.raises(BuildError, match="no such file"):
        find_source({SOURCE_ENV: str(tmp_path / "missing")})


def test_without_a_source_only_the_static_pool_can_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(SOURCE_ENV, raising=False)
    monkeypatch.setattr(autoscaler_source, "DEFAULT_TARBALL", tmp_path / "absent.tar.gz")
    events: list[BuildEvent] = []
    assert ensure_autoscaler(wanted="if-found", progress=events.append) is None
    assert [e.kind for e in events] == ["unavailable"]
    assert SOURCE_ENV in events[0].detail
    with pytest.raises(BinariesMissingError, match=SOURCE_ENV):
        ensure_autoscaler(wanted="required")
    assert ensure_autoscaler(wanted="no") is None


def test_extract_finds_the_module(tmp_path: Path) -> None:
    mod = _extract(_tarball(tmp_path), tmp_path / "out")
    assert mod == tmp_path / "out" / "cluster-autoscaler"
    assert (mod / "apis" / "config" / "crd" / "x.yaml").is_file()


def test_groups_one_t4_per_zone_and_an_l4() -> None:
    nodes = templates(max_nodes=2500)
    pools = [n["metadata"]["labels"][POOL_LABEL] for n in nodes]
    assert pools == list(group_names())
    assert len(pools) == len(ZONES) + 1
    # A NAP pool holds at most 1,000 nodes; the quota (max-nodes-total) caps the sum.
    assert {n["metadata"]["annotations"][MAX_COUNT] for n in nodes} == {"1000"}
    assert {n["metadata"]["annotations"][MAX_COUNT] for n in templates(max_nodes=7)} == {"7"}
    t4, l4 = nodes[0], nodes[-1]
    # Labelled and tainted as the static pool's T4 nodes, but for the per-node hostname (the
    # simulated cloud adds it) and the not-ready taint a kubelet registers with.
    today = gpu_node("x", pool=pools[0], zone=ZONES[0], role="autoscaled")
    expected = {k: v for k, v in today["metadata"]["labels"].items() if k != "kubernetes.io/hostname"}
    assert t4["metadata"]["labels"] == expected
    assert t4["spec"]["taints"] == [GPU_TAINT, NOT_READY_TAINT]
    assert t4["status"]["allocatable"] == today["status"]["allocatable"]
    assert l4["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    assert l4["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "g2-standard-8"
    assert l4["status"]["allocatable"]["nvidia.com/gpu"] == "1"


def test_provider_config_and_configmaps() -> None:
    cfg = provider_config()
    assert cfg["nodegroups"] == {"fromNodeLabelKey": "cloud.google.com/gke-nodepool"}
    assert cfg["nodes"]["skipTaint"] is True
    assert cfg["nodes"]["gpuConfig"]["gpuLabelKey"] == "cloud.google.com/gke-accelerator"
    config_cm, templates_cm = configmaps("kube-system", 10)
    assert config_cm["metadata"] == {"name": "kwok-provider-config", "namespace": "kube-system"}
    assert yaml.safe_load(config_cm["data"]["config"]) == cfg
    # The provider reads the key `templates` (kwok_helpers.go), a v1 List of Nodes.
    listed = yaml.safe_load(templates_cm["data"]["templates"])
    assert listed["kind"] == "List"
    assert len(listed["items"]) == len(group_names())


def test_command_line_follows_the_knobs(tmp_path: Path) -> None:
    lay = Layout(tmp_path)
    build = AutoscalerBuild(tmp_path / "ca")
    ports = Ports(1, 2, 3, 4, 5, 6, autoscaler_metrics=7)
    s = AutoscalerSettings(max_nodes=40, scan_interval=2.5, scale_down_after=90, max_node_provision_time=120)
    argv = components.cluster_autoscaler(build, lay, ports, ClusterConfig(state_dir=tmp_path), s)
    assert argv[0] == str(build.binary)
    for flag in (
        "--cloud-provider=kwok",
        "--address=127.0.0.1:7",
        "--leader-elect=false",
        "--namespace=kube-system",
        "--max-nodes-total=40",
        "--scan-interval=2.5s",
        "--scale-down-unneeded-time=90s",
        "--scale-down-delay-after-add=90s",
        "--max-scale-down-parallelism=10",
        "--max-node-provision-time=120s",
        "--max-node-startup-time=120s",
        "--expendable-pods-priority-cutoff=-10",
        "--expander=priority,least-waste",
        "--enable-provisioning-requests=true",
        "--capacity-buffer-controller-enabled=true",
        "--capacity-buffer-pod-injection-enabled=true",
        "--max-nodes-per-scaleup=1000",
        "--max-nodegroup-binpacking-duration=10s",
    ):
        assert flag in argv
    assert not [a for a in argv if a.startswith(("--balance", "--balancing"))]
    # GKE's BALANCED location policy: the zone groups of a type are similar but for their pool.
    balanced = components.cluster_autoscaler(
        build,
        lay,
        ports,
        ClusterConfig(state_dir=tmp_path),
        replace(s, balance_zones=True, max_nodes_per_scaleup=4000, max_binpacking_s=60),
    )
    assert "--max-nodegroup-binpacking-duration=60s" in balanced
    assert "--balance-similar-node-groups=true" in balanced
    assert "--balancing-ignore-label=cloud.google.com/gke-nodepool" in balanced
    assert "--max-nodes-per-scaleup=4000" in balanced
    with pytest.raises(ValueError, match="max_nodes_per_scaleup"):
        replace(s, max_nodes_per_scaleup=0).validated()
    env = components.cluster_autoscaler_env(lay)
    assert env["KUBECONFIG"] == str(lay.kubeconfig)
    assert env["KWOK_PROVIDER_MODE"] == "local"
    assert env["POD_NAMESPACE"] == "kube-system"


def test_crds_come_from_the_source(tmp_path: Path) -> None:
    if not DEFAULT_TARBALL.is_file():
        pytest.skip(f"{DEFAULT_TARBALL} not beside this checkout")
    mod = _extract(DEFAULT_TARBALL, tmp_path / "src")
    names = {d["metadata"]["name"] for d in crd_documents(mod / "apis" / "config" / "crd")}
    assert {"provisioningrequests.autoscaling.x-k8s.io", "capacitybuffers.autoscaling.x-k8s.io"} <= names


def test_the_build_patches_apply_to_the_pinned_source_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    if not DEFAULT_TARBALL.is_file():
        pytest.skip(f"{DEFAULT_TARBALL} not beside this checkout")
    mod = _extract(DEFAULT_TARBALL, tmp_path / "src")
    _apply_patches(mod, tmp_path / "build.log")
    nodegroups = (mod / "cloudprovider" / "kwok" / "kwok_nodegroups.go").read_text()
    assert 'stockoutAnnotation = "eops.dev/stockout"' in nodegroups
    assert "KubeClientOpts.KubeClientQPS" in (mod / "cloudprovider" / "kwok" / "kwok_provider.go").read_text()
    # Applied twice (another release, or a source already patched): an error, never a guess.
    with pytest.raises(BuildError, match="does not apply"):
        _apply_patches(mod, tmp_path / "build.log")


def test_the_patches_are_part_of_the_build_stamp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    src = autoscaler_source.AutoscalerSource(tmp_path / "x.tar.gz", True, "0" * 64)
    before = src.stamp
    patch = tmp_path / "other.patch"
    patch.write_text("a different patch\n")
    monkeypatch.setattr(autoscaler_source, "PATCHES", (patch,))
    assert src.stamp != before


def test_template_copies_register_not_ready_and_tainted_as_a_kubelet_does() -> None:
    for node in templates(max_nodes=4, registered_at="2026-12-01T10:00:00Z"):
        (ready,) = node["status"]["conditions"]
        assert (ready["type"], ready["status"], ready["lastTransitionTime"]) == (
            "Ready",
            "False",
            "2026-12-01T10:00:00Z",
        )
        assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"  # what scale-up simulates
