"""Pinned versions of everything the dev cluster builds, and how each binary is built.

Why these versions: they are the newest that build with Go 1.26 and fit together
(kwok v0.8.0 is built against Kubernetes 0.36.x; etcd 3.6 is what Kubernetes 1.36 is tested
with, and 1.35+ needs etcd >= 3.5.13 for consistent watches). The wrapper modules under
`gomod/` pin the exact module graph; their go.sum files are part of the cache stamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
# The real cluster-autoscaler, built from source (autoscaler_source.py): 1.36.x is built
# against Kubernetes 0.36.2, the same minor as the control plane.
CLUSTER_AUTOSCALER_VERSION = "1.36.1"
AUTOSCALER_TARBALL = f"cluster-autoscaler-{CLUSTER_AUTOSCALER_VERSION}-src.tar.gz"
AUTOSCALER_BINARY = "cluster-autoscaler"
# Kueue, the cluster's own job queueing (`eops dev-cluster up --kueue`): its manager binary and,
# from the same module, its CRDs and webhook manifests. Cached under a stamp of its own, so a new
# Kueue never rebuilds the control plane. v0.17.0 is built against Kubernetes 0.35, one minor
# below the control plane (client-go supports a skew of one).
KUEUE_VERSION = "v0.17.0"
KUEUE_MODULE_PATH = "sigs.k8s.io/kueue"
KUEUE_PACKAGE = "sigs.k8s.io/kueue/cmd/kueue"
KUEUE_CRD_DIR = "config/components/crd"  # bases/ and the conversion patches its kustomization names
KUEUE_WEBHOOK_FILE = "config/components/webhook/manifests.yaml"
# The helm CLI, for the tests of the chart (charts/elasticityops): not part of the cluster, so
# cached under a stamp of its own (a new helm must not rebuild the control plane).
HELM_VERSION = "v3.22.0"


def _kube_version_ldflags(version: str) -> list[str]:
    # Upstream's build injects the version into both packages; without it /version says v0.0.0.
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return flags


@dataclass(frozen=True)
class Component:
    """One `go build` invocation: a wrapper module directory and the packages it builds."""

    name: str
    module_dir: str  # directory name under gomod/
    version: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]  # output file names, in the order of `packages`
    ldflags: tuple[str, ...] = field(default=())


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="etcd",
        module_dir="etcd",
        version=ETCD_VERSION,
        packages=("go.etcd.io/etcd/server/v3",),
        binaries=("etcd",),
        ldflags=("-s", "-w", f"-X go.etcd.io/etcd/api/v3/version.GitSHA={ETCD_VERSION}"),
    ),
    Component(
        name="kwok",
        module_dir="kwok",
        version=KWOK_VERSION,
        packages=("sigs.k8s.io/kwok/cmd/kwok",),
        binaries=("kwok",),
        ldflags=("-s", "-w"),
    ),
    Component(
        name="kubernetes",
        module_dir="kubernetes",
        version=KUBERNETES_VERSION,
        packages=(
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
        ),
        binaries=("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
        ldflags=("-s", "-w", *_kube_version_ldflags(KUBERNETES_VERSION)),
    ),
)

ALL_BINARIES: tuple[str, ...] = tuple(b for c in COMPONENTS for b in c.binaries)

# Stock kwok stages assembled from the kwok module at build time (paths inside the module).
# Node: create-and-keep-alive. Pod: the zero-delay "ready" and "delete" stages; pod completion
# is ours (see stages.py) because it reads the run time and exit code from annotations.
STOCK_STAGE_FILES: tuple[str, ...] = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def kueue_ldflags() -> tuple[str, ...]:
    """What Kueue's Makefile sets: the version its manager logs and reports."""
    return ("-s", "-w", f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}")


def helm_ldflags(client_go: str) -> tuple[str, ...]:
    """What helm's Makefile sets: its version, and the Kubernetes version `helm lint` and `helm
    template` assume, derived from the client-go it is built with (v0.37.x: Kubernetes 1.37)."""
    minor = client_go.lstrip("v").split(".")[1]
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"]
    flags.append("-X helm.sh/helm/v3/internal/version.gitTreeState=clean")
    for pkg in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {pkg}.k8sVersionMajor=1", f"-X {pkg}.k8sVersionMinor={minor}"]
    return tuple(flags)


# The Prometheus operator's own ServiceMonitor CRD, so that the chart's cluster test checks the
# ServiceMonitor it renders against the schema a real operator installs (the dev cluster runs no
# operator; a CRD written by us only knew what we thought the operator accepts). The file is the
# operator's generated CRD (controller-gen, with descriptions) from its Go module, fetched at
# build time through the Go module proxy (checksum-verified by go), never copied into the repo.
# v0.85.0: the operator release the project's module proxy serves (`go list -m -versions` lists
# it alone); its ServiceMonitor is monitoring.coreos.com/v1, the API version the chart renders.
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
SERVICEMONITOR_CRD_FILE = "example/prometheus-operator-crd-full/monitoring.coreos.com_servicemonitors.yaml"
