"""A real small filesystem for full-disk tests: a tmpfs of a few MiB mounted for the length of
a with block (root and mount(8) needed: the test is skipped, saying so, where the machine
cannot mount one), and a filler file that takes whatever room is left on it.

    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        filler = fill(disk)          # the disk is full now: a write meets ENOSPC
        ...
        filler.unlink()              # room again"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_CHUNK = 64 * 1024


@contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of `size` at `path` (made if missing), unmounted at the end. Every process that
    has files open on it must be stopped first: the unmount waits up to 20 s for them, then
    detaches it lazily."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("a full-disk test mounts a small tmpfs, which needs root and mount(8)")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs ({done.stderr.strip()}): no full-disk test here")
    try:
        yield path
    finally:
        _unmount(path)


def _unmount(path: Path) -> None:
    deadline = time.monotonic() + 20.0
    while subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
            return
        time.sleep(0.2)


def fill(disk: Path, name: str = "filler") -> Path:
    """A file on `disk` written until the disk refuses more (ENOSPC); unlink it to free the room."""
    filler = disk / name
    chunk = b"\0" * _CHUNK
    with filler.open("ab") as out:
        fd = out.fileno()
        size = _CHUNK
        while size:
            try:
                os.write(fd, chunk[:size])
            except OSError:
                size //= 2  # the last pages: smaller writes take what is left
    return filler


def free_bytes(disk: Path) -> int:
    stats = os.statvfs(disk)
    return stats.f_bavail * stats.f_frsize
