"""Where the real cluster-autoscaler's source comes from, checked, and the stamp it is cached by.

The Go module proxy refuses k8s.io/autoscaler/cluster-autoscaler itself (it serves every
dependency), so the source is a pinned tarball beside the project (`../shared/third_party/`,
checked against the SHA256SUMS next to it) or, for users outside this repository, a directory
named by EOPS_AUTOSCALER_SRC: a clone of the tag (its `cluster-autoscaler/` directory or the
repository root) or another copy of the tarball. Third-party source is built, never copied
into the project.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from elasticityops.devcluster.errors import BinariesMissingError, BuildError
from elasticityops.devcluster.versions import AUTOSCALER_TARBALL, CLUSTER_AUTOSCALER_VERSION

SOURCE_ENV = "EOPS_AUTOSCALER_SRC"
# Bumped when the autoscaler's build recipe (tags, flags, what is kept beside it) changes.
AUTOSCALER_RECIPE = "2"
# Build-time patches applied to a scratch copy of the source (see each file's header).
PATCHES: tuple[Path, ...] = (Path(__file__).with_name("patches") / "kwok-provider.patch",)
BUILD_TAGS = "kwok"
# From src/elasticityops/devcluster/ up to the project root, then its sibling shared/.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TARBALL = PROJECT_ROOT.parent / "shared" / "third_party" / AUTOSCALER_TARBALL


@dataclass(frozen=True)
class AutoscalerSource:
    """A checked source: a tarball (extracted at build time) or a module directory."""

    path: Path
    is_tarball: bool
    digest: str  # sha256 of the tarball, or of the directory's go.mod, go.sum and .go files

    @property
    def stamp(self) -> str:
        patches = "|".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in PATCHES)
        recipe = hashlib.sha256(
            f"{AUTOSCALER_RECIPE}|{BUILD_TAGS}|{self.digest}|{patches}".encode()
        ).hexdigest()
        return f"cluster-autoscaler{CLUSTER_AUTOSCALER_VERSION}-{recipe[:12]}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def expected_sha256(tarball: Path) -> str:
    """The tarball's line in the SHA256SUMS beside it (`sha256sum` format)."""
    sums = tarball.parent / "SHA256SUMS"
    try:
        lines = sums.read_text().splitlines()
    except OSError as exc:
        raise BuildError(f"cannot read {sums} to check {tarball.name}: {exc}") from None
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == tarball.name:
            return parts[0].lower()
    raise BuildError(f"{sums} has no checksum for {tarball.name}")


def checked_tarball(tarball: Path) -> AutoscalerSource:
    actual, expected = sha256_file(tarball), expected_sha256(tarball)
    if actual != expected:
        raise BuildError(
            f"checksum mismatch for {tarball}: sha256 {actual}, SHA256SUMS says {expected}; "
            "refusing to build from it"
        )
    return AutoscalerSource(tarball, True, actual)


def module_dir(path: Path) -> Path:
    """The directory holding cluster-autoscaler's go.mod: `path` itself or its cluster-autoscaler/."""
    for candidate in (path, path / "cluster-autoscaler"):
        gomod = candidate / "go.mod"
        if gomod.is_file() and gomod.read_text().startswith("module k8s.io/autoscaler/cluster-autoscaler"):
            return candidate
    raise BuildError(f"{path} holds no k8s.io/autoscaler/cluster-autoscaler module (go.mod)")


def directory_digest(mod: Path) -> str:
    """Content hash of what `go build` reads: go.mod, go.sum and every non-test .go file."""
    digest = hashlib.sha256()
    files = [mod / "go.mod", mod / "go.sum"]
    files += sorted(p for p in mod.rglob("*.go") if not p.name.endswith("_test.go"))
    for f in files:
        digest.update(str(f.relative_to(mod)).encode() + b"\0")
        digest.update(f.read_bytes())
    return digest.hexdigest()


def find_source(env: dict[str, str] | None = None) -> AutoscalerSource:
    """The source named by EOPS_AUTOSCALER_SRC, else the pinned tarball beside the project."""
    env = dict(os.environ) if env is None else env
    named = env.get(SOURCE_ENV, "")
    if named:
        path = Path(named).expanduser().resolve()
        if path.is_file():
            # Another copy of the pinned tarball: it needs its SHA256SUMS beside it too.
            return checked_tarball(path)
        if not path.is_dir():
            raise BuildError(f"{SOURCE_ENV}={named}: no such file or directory")
        mod = module_dir(path)
        return AutoscalerSource(mod, False, directory_digest(mod))
    if not DEFAULT_TARBALL.is_file():
        raise BinariesMissingError(
            f"cluster-autoscaler source not found: no {DEFAULT_TARBALL}; set {SOURCE_ENV} to a clone "
            f"of kubernetes/autoscaler at tag cluster-autoscaler-{CLUSTER_AUTOSCALER_VERSION}"
        )
    return checked_tarball(DEFAULT_TARBALL)
