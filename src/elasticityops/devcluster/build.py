"""Build the pinned binaries from the Go module proxy, once per stamp.

Each wrapper module under gomod/ is built with one `go build -o DIR/ pkg...` so shared
packages compile once; GOTOOLCHAIN=local makes a surprise `go` line fail instead of fetching a
toolchain, CGO_ENABLED=0 and -trimpath match upstream's release builds. Progress is reported
as one line per compiled package (`go build -v`), against the package count from `go list -deps`.
The Prometheus operator's ServiceMonitor CRD comes the same way, a file copied out of its
module (nothing to build), for the chart's cluster test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from elasticityops.devcluster.autoscaler_source import (
    BUILD_TAGS,
    PATCHES,
    AutoscalerSource,
    find_source,
    module_dir,
)
from elasticityops.devcluster.errors import BinariesMissingError, BuildError
from elasticityops.devcluster.paths import (
    GOMOD_DIR,
    HELM_MODULE,
    KUEUE_MODULE,
    KUEUE_PATCHES,
    AutoscalerBuild,
    HelmBuild,
    KueueBuild,
    OperatorCrds,
    Toolchain,
    cache_root,
    current_helm,
    current_kueue,
    current_operator_crds,
    current_toolchain,
    helm_client_go,
    servicemonitor_crd_source,
)
from elasticityops.devcluster.versions import (
    AUTOSCALER_BINARY,
    CLUSTER_AUTOSCALER_VERSION,
    COMPONENTS,
    HELM_VERSION,
    KUEUE_CRD_DIR,
    KUEUE_MODULE_PATH,
    KUEUE_PACKAGE,
    KUEUE_VERSION,
    KUEUE_WEBHOOK_FILE,
    KWOK_VERSION,
    PROMETHEUS_OPERATOR_MODULE,
    PROMETHEUS_OPERATOR_VERSION,
    SERVICEMONITOR_CRD_FILE,
    STOCK_STAGE_FILES,
    Component,
    helm_ldflags,
    kueue_ldflags,
)

AUTOSCALER = "cluster-autoscaler"
AutoscalerWanted = Literal["if-found", "required", "no"]


@dataclass(frozen=True)
class BuildEvent:
    """What the progress display is told: a component started, a package compiled, or done."""

    component: str
    kind: str  # "start" (total = package count), "package", "linked", "skipped", "unavailable"
    detail: str = ""
    total: int = 0


ProgressFn = Callable[[BuildEvent], None]


def _noop(_: BuildEvent) -> None:
    return None


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",
        GOFLAGS="-trimpath -mod=readonly",
        CGO_ENABLED="0",
    )
    return env


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BinariesMissingError("`go` is not on PATH: install Go >= 1.26 to build the dev cluster")
    return go


def _count_packages(comp: Component, env: dict[str, str]) -> int:
    return _count_in(GOMOD_DIR / comp.module_dir, list(comp.packages), env)


def _build_component(comp: Component, bin_dir: Path, log: Path, progress: ProgressFn) -> None:
    env = go_env()
    total = _count_packages(comp, env)
    # Several main packages need a directory target: one binary per package.
    single = len(comp.binaries) == 1
    args = ["-ldflags", " ".join(comp.ldflags), *comp.packages]
    _go_build(
        comp.name, GOMOD_DIR / comp.module_dir, args, comp.binaries, single, bin_dir, log, progress, total
    )


def _go_build(
    name: str,
    cwd: Path,
    args: list[str],
    binaries: tuple[str, ...],
    single: bool,
    bin_dir: Path,
    log: Path,
    progress: ProgressFn,
    total: int,
) -> None:
    """`go build -v -o TARGET args...` in `cwd`, one progress event per compiled package."""
    progress(BuildEvent(name, "start", total=total))
    # Build into a scratch directory and move into place at the end, so an interrupted build
    # never leaves a half-written binary that a later run would take as finished.
    scratch = bin_dir / f".partial-{name}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    target = str(scratch / binaries[0]) if single else str(scratch) + os.sep
    argv = [_go(), "build", "-v", "-o", target, *args]
    with log.open("a") as logf:
        logf.write(f"$ (cd {cwd} && {' '.join(argv)})\n")
        logf.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=go_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            logf.write(line)
            pkg = line.strip()
            # `go build -v` prints bare package paths; anything else is a diagnostic.
            if pkg and " " not in pkg:
                progress(BuildEvent(name, "package", detail=pkg, total=total))
        rc = proc.wait()
    if rc != 0:
        raise BuildError(f"go build of {name} failed (rc={rc}); see {log}:\n{_tail(log)}")
    for binary in binaries:
        (scratch / binary).replace(bin_dir / binary)
    scratch.rmdir()
    progress(BuildEvent(name, "linked", detail=", ".join(binaries), total=total))


def _tail(path: Path, chars: int = 3000) -> str:
    text = path.read_text(errors="replace")
    return text[-chars:]


def download_module(module: str, version: str, cwd: Path) -> dict[str, str]:
    """`go mod download -json MODULE@VERSION` in `cwd`: what go says of it (its "Dir" in the
    module cache, its "Sum"), downloaded and checksum-verified first if needed."""
    out = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        # -json puts go's reason in the "Error" field on stdout, not on stderr.
        raise BuildError(
            f"go mod download of {module}@{version} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        )
    info: dict[str, str] = json.loads(out.stdout)
    return info


def kwok_module_dir() -> Path:
    """The kwok module's directory in the module cache (downloaded if needed)."""
    return Path(download_module("sigs.k8s.io/kwok", KWOK_VERSION, GOMOD_DIR / "kwok")["Dir"])


def assemble_stock_stages(dest: Path) -> None:
    """Concatenate kwok's stock stages from the module cache (never vendored into the repo)."""
    src = kwok_module_dir()
    docs = [(src / rel).read_text().strip() for rel in STOCK_STAGE_FILES]
    dest.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Assembled from sigs.k8s.io/kwok@{KWOK_VERSION} ({', '.join(STOCK_STAGE_FILES)})\n"
    dest.write_text(header + "\n---\n".join(docs) + "\n")


def _count_in(cwd: Path, args: list[str], env: dict[str, str]) -> int:
    out = subprocess.run(
        [_go(), "list", "-deps", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise BuildError(f"go list in {cwd} failed:\n{out.stderr[-4000:]}")
    return len(out.stdout.split())


def _copy(mod: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(mod, dest, ignore=shutil.ignore_patterns(".git"))
    return dest


def _writable_copy(tree: Path, dest: Path) -> Path:
    """`_copy` of a tree from the Go module cache, whose files and directories are read-only
    there, made writable (to patch it, and to remove or replace it later)."""
    _copy(tree, dest)
    for path in [dest, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def _apply_patches(
    mod: Path, log: Path, patches: tuple[Path, ...] = PATCHES, what: str = "cluster-autoscaler"
) -> None:
    git = shutil.which("git")
    if git is None:
        raise BinariesMissingError(f"`git` is not on PATH: it applies the {what}'s build patches")
    for patch in patches:
        # git apply takes no fuzz: a patch that does not apply exactly is an error, never a guess.
        out = subprocess.run(
            [git, "apply", "--verbose", str(patch)], cwd=mod, capture_output=True, text=True, check=False
        )
        with log.open("a") as f:
            f.write(f"$ git apply {patch}\n{out.stdout}{out.stderr}")
        if out.returncode != 0:
            raise BuildError(
                f"the build patch {patch.name} does not apply to {mod} (another {what} "
                f"release?):\n{out.stderr[-2000:]}"
            )


def _extract(tarball: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tarfile.open(tarball, "r:gz") as tar:
        # The "data" filter refuses absolute paths, links out of dest and device files.
        tar.extractall(dest, filter="data")
    return module_dir(dest)


def build_autoscaler(src: AutoscalerSource, build: AutoscalerBuild, progress: ProgressFn = _noop) -> None:
    """`go build -tags kwok .` of cluster-autoscaler; keeps the binary and the CRDs it serves."""
    build.root.mkdir(parents=True, exist_ok=True)
    bin_dir = build.binary.parent
    bin_dir.mkdir(exist_ok=True)
    log = build.root / "build.log"
    started, cpu_before = time.monotonic(), _children_cpu()
    # Always a scratch copy: the patches must never change a user's clone.
    scratch_src = build.root / "src"
    mod = _extract(src.path, scratch_src) if src.is_tarball else _copy(src.path, scratch_src)
    _apply_patches(mod, log)
    env = go_env()
    tags = ["-tags", BUILD_TAGS]
    total = _count_in(mod, [*tags, "."], env)
    _go_build(AUTOSCALER, mod, [*tags, "."], (AUTOSCALER_BINARY,), True, bin_dir, log, progress, total)
    # The CRDs of ProvisioningRequest, CapacityBuffer and CapacityQuota, installed at `up`.
    shutil.rmtree(build.crd_dir, ignore_errors=True)
    shutil.copytree(mod / "apis" / "config" / "crd", build.crd_dir)
    shutil.rmtree(scratch_src, ignore_errors=True)
    build.marker.write_text(
        json.dumps(
            {
                "version": CLUSTER_AUTOSCALER_VERSION,
                "source": str(src.path),
                "source_sha256": src.digest,
                "patches": [p.name for p in PATCHES],
                "build_seconds": round(time.monotonic() - started, 1),
                "build_cpu_seconds": round(_children_cpu() - cpu_before, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
    )


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


class _Cached(Protocol):
    @property
    def root(self) -> Path: ...

    def is_complete(self) -> bool: ...


def _reused(name: str, cached: _Cached, allow_build: bool, progress: ProgressFn, missing: str) -> bool:
    """Whether what `cached` stamps is there already (reported as skipped); when it is not and
    may not be built here, BinariesMissingError names where it was looked for and the fix."""
    if cached.is_complete():
        progress(BuildEvent(name, "skipped", detail=str(cached.root)))
        return True
    if not allow_build:
        raise BinariesMissingError(f"{missing} at {cached.root}; run `eops dev-cluster build`")
    return False


def ensure_autoscaler(
    *, allow_build: bool = True, wanted: AutoscalerWanted = "if-found", progress: ProgressFn = _noop
) -> AutoscalerBuild | None:
    """The real cluster-autoscaler for the current source, built first if needed.

    "if-found": None when no source is found (a cluster with --no-autoscaling needs none);
    "required": that is an error. A source that is found but fails its checksum is always an error.
    """
    if wanted == "no":
        return None
    try:
        src = find_source()
    except BinariesMissingError as exc:
        if wanted == "required":
            raise
        progress(BuildEvent(AUTOSCALER, "unavailable", detail=str(exc)))
        return None
    build = AutoscalerBuild(cache_root() / src.stamp)
    if _reused(AUTOSCALER, build, allow_build, progress, "cluster-autoscaler not built"):
        return build
    build_autoscaler(src, build, progress)
    return build


def ensure_built(
    *,
    allow_build: bool = True,
    progress: ProgressFn = _noop,
    autoscaler: AutoscalerWanted = "if-found",
    kueue: bool = False,
) -> Toolchain:
    """Return the toolchain for the current stamp, building it first if needed (the control
    plane, then the real cluster-autoscaler as `autoscaler` asks, then Kueue if asked)."""
    tc = _ensure_control_plane(allow_build, progress)
    found = ensure_autoscaler(allow_build=allow_build, wanted=autoscaler, progress=progress)
    queueing = ensure_kueue(allow_build=allow_build, progress=progress) if kueue else None
    return replace(tc, autoscaler=found, kueue=queueing)


def _ensure_control_plane(allow_build: bool, progress: ProgressFn) -> Toolchain:
    tc = current_toolchain()
    if tc.is_complete():
        for comp in COMPONENTS:
            progress(BuildEvent(comp.name, "skipped", detail=str(tc.bin_dir)))
        return tc
    if not allow_build:
        raise BinariesMissingError(
            f"dev-cluster binaries not built at {tc.bin_dir}; run `eops dev-cluster build`"
        )
    tc.bin_dir.mkdir(parents=True, exist_ok=True)
    log = tc.root / "build.log"
    started = time.monotonic()
    for comp in COMPONENTS:
        if all(tc.binary(b).is_file() for b in comp.binaries):
            # A partial earlier build: components are independent, keep what finished.
            progress(BuildEvent(comp.name, "skipped", detail=str(tc.bin_dir)))
            continue
        _build_component(comp, tc.bin_dir, log, progress)
    assemble_stock_stages(tc.stock_stages)
    tc.marker.write_text(
        json.dumps(
            {
                "versions": {c.name: c.version for c in COMPONENTS},
                "build_seconds": round(time.monotonic() - started, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
    )
    return tc


HELM = "helm"
HELM_PACKAGE = "helm.sh/helm/v3/cmd/helm"


def _build_one(
    name: str, module: Path, package: str, ldflags: tuple[str, ...], binary: Path, progress: ProgressFn
) -> dict[str, float]:
    """`go build` of one binary of a wrapper module (helm, Kueue): what its marker records of
    the build's cost."""
    bin_dir = binary.parent
    bin_dir.mkdir(parents=True, exist_ok=True)
    started, cpu_before = time.monotonic(), _children_cpu()
    total = _count_in(module, [package], go_env())
    args = ["-ldflags", " ".join(ldflags), package]
    _go_build(
        name, module, args, (binary.name,), True, bin_dir, bin_dir.parent / "build.log", progress, total
    )
    return {
        "build_seconds": round(time.monotonic() - started, 1),
        "build_cpu_seconds": round(_children_cpu() - cpu_before, 1),
    }


def _mark(marker: Path, version: str, cost: dict[str, float]) -> None:
    built_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    marker.write_text(json.dumps({"version": version, **cost, "built_at": built_at}, indent=2))


def ensure_helm(*, allow_build: bool = True, progress: ProgressFn = _noop) -> HelmBuild:
    """The helm CLI of the pinned version, built from the Go module proxy first if needed."""
    build = current_helm()
    if _reused(HELM, build, allow_build, progress, "helm not built"):
        return build
    ldflags = helm_ldflags(helm_client_go())
    _mark(
        build.marker,
        HELM_VERSION,
        _build_one(HELM, HELM_MODULE, HELM_PACKAGE, ldflags, build.binary, progress),
    )
    return build


KUEUE = "kueue"


def ensure_kueue(*, allow_build: bool = True, progress: ProgressFn = _noop) -> KueueBuild:
    """Kueue's manager of the pinned version, built from the Go module proxy first if needed,
    with its CRDs and webhook manifests copied beside it."""
    build = current_kueue()
    if _reused(KUEUE, build, allow_build, progress, "Kueue not built"):
        return build
    module = Path(download_module(KUEUE_MODULE_PATH, KUEUE_VERSION, KUEUE_MODULE)["Dir"])
    wrapper = _patched_kueue(module, build.root / "src", build.root / "build.log")
    cost = _build_one(KUEUE, wrapper, KUEUE_PACKAGE, kueue_ldflags(), build.binary, progress)
    shutil.rmtree(build.root / "src", ignore_errors=True)
    _writable_copy(module / KUEUE_CRD_DIR, build.crd_dir)
    build.webhooks.write_bytes((module / KUEUE_WEBHOOK_FILE).read_bytes())
    _mark(build.marker, KUEUE_VERSION, cost)
    return build


def _patched_kueue(module: Path, scratch: Path, log: Path) -> Path:
    """A scratch copy of Kueue's module with the build patches applied, and a copy of the
    wrapper module that builds it in place of the proxy's (`replace`): the same dependencies,
    pinned by the wrapper's go.sum. Returns the wrapper's copy."""
    scratch.mkdir(parents=True, exist_ok=True)
    source = _writable_copy(module, scratch / "kueue")
    _apply_patches(source, log, KUEUE_PATCHES, "Kueue")
    wrapper = _copy(KUEUE_MODULE, scratch / "wrapper")
    with (wrapper / "go.mod").open("a") as mod:
        mod.write(f"\nreplace {KUEUE_MODULE_PATH} => {source}\n")
    return wrapper


OPERATOR_CRDS = "prometheus-operator-crds"


def store_servicemonitor_crd(crds: OperatorCrds, data: bytes, module_sum: str) -> None:
    """Write the CRD, then its marker (version, source, sha256): a copy interrupted half-way
    has no marker, and one changed later no longer matches it."""
    crds.servicemonitor.parent.mkdir(parents=True, exist_ok=True)
    crds.marker.unlink(missing_ok=True)
    partial = crds.servicemonitor.with_name(crds.servicemonitor.name + ".partial")
    partial.write_bytes(data)
    partial.replace(crds.servicemonitor)
    crds.marker.write_text(
        json.dumps(
            {
                "version": PROMETHEUS_OPERATOR_VERSION,
                "source": servicemonitor_crd_source(),
                "sha256": hashlib.sha256(data).hexdigest(),
                "module_sum": module_sum,
                "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
    )


def ensure_operator_crds(*, allow_build: bool = True, progress: ProgressFn = _noop) -> OperatorCrds:
    """The Prometheus operator's ServiceMonitor CRD of the pinned release, fetched from the Go
    module proxy into its own stamp directory first if needed (the chart's cluster test)."""
    crds = current_operator_crds()
    missing = "the Prometheus operator's ServiceMonitor CRD is not fetched"
    if _reused(OPERATOR_CRDS, crds, allow_build, progress, missing):
        return crds
    progress(BuildEvent(OPERATOR_CRDS, "start", total=1))
    # The operator is in none of our wrapper modules' graphs: from an empty temporary directory
    # rather than the repository or a wrapper module, no go.mod of ours is loaded for it.
    with tempfile.TemporaryDirectory(prefix="eops-go-") as nowhere:
        info = download_module(PROMETHEUS_OPERATOR_MODULE, PROMETHEUS_OPERATOR_VERSION, Path(nowhere))
    source = Path(info["Dir"]) / SERVICEMONITOR_CRD_FILE
    if not source.is_file():
        raise BuildError(
            f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION} has no {SERVICEMONITOR_CRD_FILE} "
            f"(looked in {info['Dir']})"
        )
    store_servicemonitor_crd(crds, source.read_bytes(), info.get("Sum", ""))
    progress(BuildEvent(OPERATOR_CRDS, "linked", detail=crds.servicemonitor.name, total=1))
    return crds
