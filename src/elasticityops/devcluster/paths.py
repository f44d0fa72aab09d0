"""Where things live: the binary cache (outside the repo) and the wrapper modules (inside it)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from elasticityops.devcluster.versions import (
    ALL_BINARIES,
    AUTOSCALER_BINARY,
    COMPONENTS,
    HELM_VERSION,
    KUEUE_VERSION,
    PROMETHEUS_OPERATOR_MODULE,
    PROMETHEUS_OPERATOR_VERSION,
    SERVICEMONITOR_CRD_FILE,
    STOCK_STAGE_FILES,
    helm_ldflags,
    kueue_ldflags,
)

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
# Bumped when the build recipe itself (flags, stage assembly) changes, so old caches are not reused.
RECIPE_VERSION = "1"


def cache_root() -> Path:
    """`${EOPS_CACHE_DIR:-~/.cache/elasticityops}/devcluster`."""
    base = os.environ.get("EOPS_CACHE_DIR") or str(Path.home() / ".cache" / "elasticityops")
    return Path(base).expanduser() / "devcluster"


def build_stamp() -> str:
    """Versions + a hash of every wrapper go.mod/go.sum + the recipe: equal stamp, equal binaries."""
    digest = hashlib.sha256(RECIPE_VERSION.encode())
    for comp in COMPONENTS:
        digest.update(comp.name.encode() + comp.version.encode() + " ".join(comp.ldflags).encode())
        for fname in ("go.mod", "go.sum"):
            digest.update((GOMOD_DIR / comp.module_dir / fname).read_bytes())
    digest.update("\n".join(STOCK_STAGE_FILES).encode())
    versions = "-".join(f"{c.name}{c.version}" for c in COMPONENTS)
    return f"{versions}-{digest.hexdigest()[:12]}"


HELM_MODULE = GOMOD_DIR / "helm"


def helm_client_go() -> str:
    """The k8s.io/client-go version helm's wrapper module pins (its go.mod)."""
    for line in (HELM_MODULE / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["k8s.io/client-go"]:
            return words[1]
    raise ValueError(f"{HELM_MODULE / 'go.mod'} pins no k8s.io/client-go")


def helm_stamp() -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode() + " ".join(helm_ldflags(helm_client_go())).encode())
    for fname in ("go.mod", "go.sum"):
        digest.update((HELM_MODULE / fname).read_bytes())
    return f"helm{HELM_VERSION}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class HelmBuild:
    """The helm CLI of one stamp (the chart's tests use it; the cluster does not)."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "helm"

    @property
    def marker(self) -> Path:
        return self.root / "complete.json"

    def is_complete(self) -> bool:
        return self.marker.is_file() and self.binary.is_file()


def current_helm() -> HelmBuild:
    return HelmBuild(cache_root() / helm_stamp())


KUEUE_MODULE = GOMOD_DIR / "kueue"
# Build-time patches applied to a scratch copy of Kueue's module (see each file's header).
KUEUE_PATCHES: tuple[Path, ...] = (
    Path(__file__).with_name("patches") / "kueue-multikueue-worker-rate.patch",
)


def kueue_stamp() -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode() + " ".join(kueue_ldflags()).encode())
    for fname in ("go.mod", "go.sum"):
        digest.update((KUEUE_MODULE / fname).read_bytes())
    for patch in KUEUE_PATCHES:
        digest.update(patch.read_bytes())
    return f"kueue{KUEUE_VERSION}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class KueueBuild:
    """Kueue's manager of one stamp, with the CRDs and webhook manifests of the same module
    version copied out of the Go module cache (read-only there, and it may be cleaned)."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "kueue"

    @property
    def crd_dir(self) -> Path:
        """bases/*.yaml, patches/*.yaml and the kustomization that says which patches apply."""
        return self.root / "crd"

    @property
    def webhooks(self) -> Path:
        return self.root / "webhooks.yaml"

    @property
    def marker(self) -> Path:
        return self.root / "complete.json"

    def is_complete(self) -> bool:
        return self.marker.is_file() and self.binary.is_file() and self.webhooks.is_file()


def current_kueue() -> KueueBuild:
    return KueueBuild(cache_root() / kueue_stamp())


def servicemonitor_crd_source() -> str:
    """Where the ServiceMonitor CRD comes from: the pinned module and the file inside it."""
    return f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION}/{SERVICEMONITOR_CRD_FILE}"


def operator_crds_stamp() -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode() + servicemonitor_crd_source().encode())
    return f"prometheus-operator{PROMETHEUS_OPERATOR_VERSION}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class OperatorCrds:
    """The Prometheus operator's ServiceMonitor CRD of one stamp, copied out of the Go module
    cache (which is read-only and may be cleaned) for the chart's cluster test to apply."""

    root: Path

    @property
    def servicemonitor(self) -> Path:
        return self.root / "crd" / Path(SERVICEMONITOR_CRD_FILE).name

    @property
    def marker(self) -> Path:
        return self.root / "complete.json"

    def is_complete(self) -> bool:
        """The marker names the pinned version and source and the file's sha256 matches it: a
        marker left by another version, or a file changed or cut short since, is not reused."""
        try:
            stamp = json.loads(self.marker.read_text())
            data = self.servicemonitor.read_bytes()
        except (OSError, ValueError):
            return False
        return (
            isinstance(stamp, dict)
            and stamp.get("version") == PROMETHEUS_OPERATOR_VERSION
            and stamp.get("source") == servicemonitor_crd_source()
            and stamp.get("sha256") == hashlib.sha256(data).hexdigest()
        )


def current_operator_crds() -> OperatorCrds:
    return OperatorCrds(cache_root() / operator_crds_stamp())


@dataclass(frozen=True)
class AutoscalerBuild:
    """The real cluster-autoscaler of one source stamp: its binary and the CRDs it serves.

    Cached apart from the control plane's stamp: the two have independent inputs, and a new
    autoscaler source must not rebuild the Kubernetes binaries (tens of minutes).
    """

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / AUTOSCALER_BINARY

    @property
    def crd_dir(self) -> Path:
        return self.root / "crd"

    @property
    def marker(self) -> Path:
        return self.root / "complete.json"

    def is_complete(self) -> bool:
        return self.marker.is_file() and self.binary.is_file() and any(self.crd_dir.glob("*.yaml"))


@dataclass(frozen=True)
class Toolchain:
    """The built artefacts of one stamp: binaries and the assembled stock kwok stages, and the
    real cluster-autoscaler's build when there is one (it has a stamp of its own)."""

    root: Path
    autoscaler: AutoscalerBuild | None = None
    kueue: KueueBuild | None = None

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def stock_stages(self) -> Path:
        return self.root / "stages" / "stock-stages.yaml"

    @property
    def marker(self) -> Path:
        return self.root / "complete.json"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def is_complete(self) -> bool:
        return self.marker.is_file() and all(self.binary(b).is_file() for b in ALL_BINARIES)


def current_toolchain() -> Toolchain:
    return Toolchain(cache_root() / build_stamp())
