"""Build the pinned binaries from the Go module proxy, once per stamp.

Each wrapper module under gomod/ is built with one `go build -o DIR/ pkg...` so shared
packages compile once; GOTOOLCHAIN=local makes a surprise `go` line fail instead of fetching a
toolchain, CGO_ENABLED=0 and -trimpath match upstream's release builds. Progress is reported
as one line per compiled package (`go build -v`), against the package count from `go list -deps`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elasticityops.devcluster.errors import BinariesMissingError, BuildError
from elasticityops.devcluster.paths import GOMOD_DIR, Toolchain, current_toolchain
from elasticityops.devcluster.versions import COMPONENTS, KWOK_VERSION, STOCK_STAGE_FILES, Component


@dataclass(frozen=True)
class BuildEvent:
    """What the progress display is told: a component started, a package compiled, or done."""

    component: str
    kind: str  # "start" (total = package count), "package", "linked", "skipped"
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
    out = subprocess.run(
        [_go(), "list", "-deps", *comp.packages],
        cwd=GOMOD_DIR / comp.module_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BuildError(f"go list for {comp.name} failed:\n{out.stderr[-4000:]}")
    return len(out.stdout.split())


def _build_component(comp: Component, bin_dir: Path, log: Path, progress: ProgressFn) -> None:
    env = go_env()
    total = _count_packages(comp, env)
    progress(BuildEvent(comp.name, "start", total=total))
    # Build into a scratch directory and move into place at the end, so an interrupted build
    # never leaves a half-written binary that a later run would take as finished.
    scratch = bin_dir / f".partial-{comp.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    # Several main packages need a directory target: one binary per package.
    target = str(scratch / comp.binaries[0]) if len(comp.binaries) == 1 else str(scratch) + os.sep
    argv = [_go(), "build", "-v", "-ldflags", " ".join(comp.ldflags), "-o", target, *comp.packages]
    with log.open("a") as logf:
        logf.write(f"$ (cd {GOMOD_DIR / comp.module_dir} && {' '.join(argv)})\n")
        logf.flush()
        proc = subprocess.Popen(
            argv,
            cwd=GOMOD_DIR / comp.module_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            logf.write(line)
            name = line.strip()
            # `go build -v` prints bare package paths; anything else is a diagnostic.
            if name and " " not in name:
                progress(BuildEvent(comp.name, "package", detail=name, total=total))
        rc = proc.wait()
    if rc != 0:
        raise BuildError(f"go build of {comp.name} failed (rc={rc}); see {log}:\n{_tail(log)}")
    for name in comp.binaries:
        (scratch / name).replace(bin_dir / name)
    scratch.rmdir()
    progress(BuildEvent(comp.name, "linked", detail=", ".join(comp.binaries), total=total))


def _tail(path: Path, chars: int = 3000) -> str:
    text = path.read_text(errors="replace")
    return text[-chars:]


def kwok_module_dir() -> Path:
    """The kwok module's directory in the module cache (downloaded if needed)."""
    out = subprocess.run(
        [_go(), "mod", "download", "-json", f"sigs.k8s.io/kwok@{KWOK_VERSION}"],
        cwd=GOMOD_DIR / "kwok",
        env=go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BuildError(f"go mod download of kwok failed:\n{out.stderr[-3000:]}")
    return Path(json.loads(out.stdout)["Dir"])


def assemble_stock_stages(dest: Path) -> None:
    """Concatenate kwok's stock stages from the module cache (never vendored into the repo)."""
    src = kwok_module_dir()
    docs = [(src / rel).read_text().strip() for rel in STOCK_STAGE_FILES]
    dest.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Assembled from sigs.k8s.io/kwok@{KWOK_VERSION} ({', '.join(STOCK_STAGE_FILES)})\n"
    dest.write_text(header + "\n---\n".join(docs) + "\n")


def ensure_built(*, allow_build: bool = True, progress: ProgressFn = _noop) -> Toolchain:
    """Return the toolchain for the current stamp, building it first if needed."""
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
