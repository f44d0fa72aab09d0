"""Reading and writing files in a run directory that a hostile job can tamper with.

A job runs as the gateway's user and knows its run directory (EOPS_RESULT_PATH is in it), so
any name there may have been replaced by a symlink (to /proc/self/environ, /dev/zero, a file
outside the run dir), a FIFO (whose open blocks until someone writes) or a device. Every file
the gateway (or the supervisor) reads from a run directory goes through here:

- opened with O_NOFOLLOW, relative to the run directory itself opened with O_NOFOLLOW, so
  neither the file nor its directory may be a link;
- opened O_NONBLOCK, so a FIFO cannot block the open, and then checked with fstat on the open
  descriptor (no race with a rename) to be a regular file;
- read bounded by the caller's limit while reading, never trusting a reported size (a /proc
  file reports 0, a file still being written grows).

These calls block on the disk: callers on an event loop run them in a thread.

Standard library only: the supervisor imports this and must start fast."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 64 * 1024
FILE_MODE = 0o600
DIR_MODE = 0o700


class UnsafeFile(OSError):
    """The name is there but is not a regular file (a link, a FIFO, a device, a directory)."""


class Bounded(NamedTuple):  # not a dataclass: `dataclasses` costs the supervisor's start
    data: bytes  # at most the limit
    over: bool  # there was more than the limit (the rest was not read)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, a regular file that is no link and whose directory is
    no link. Raises FileNotFoundError when it is absent, UnsafeFile when it is something else."""
    try:
        dir_fd = os.open(path.parent, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFile(exc.errno, f"{path.parent} is not a directory (a symbolic link?)") from None
        raise
    try:
        try:
            fd = os.open(path.name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFile(exc.errno, f"{path.name} is a symbolic link") from None
            if exc.errno == errno.ENXIO:  # a socket
                raise UnsafeFile(exc.errno, f"{path.name} is a socket") from None
            raise
    finally:
        os.close(dir_fd)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, f"{path.name} is {_kind(mode)}")
    return fd


def _read_at_most(fd: int, limit: int, offset: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.pread(fd, min(_CHUNK, limit - got), offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_bounded(path: Path, limit: int) -> Bounded:
    """Up to `limit` bytes of the file, and whether there was more. Raises FileNotFoundError
    and UnsafeFile as open_regular does."""
    fd = open_regular(path)
    try:
        data = _read_at_most(fd, limit + 1, 0)
    finally:
        os.close(fd)
    return Bounded(data[:limit], len(data) > limit)


def read_chunk(path: Path, offset: int, size: int) -> bytes:
    """Up to `size` bytes from `offset`; b"" when the file is absent or not a safe file."""
    try:
        fd = open_regular(path)
    except OSError:
        return b""
    try:
        return _read_at_most(fd, size, offset)
    finally:
        os.close(fd)


def read_tail(path: Path, size: int) -> bytes:
    """The last `size` bytes (at most); b"" when absent or not a safe file."""
    try:
        fd = open_regular(path)
    except OSError:
        return b""
    try:
        end = os.fstat(fd).st_size  # a regular file's size, only to know where to start
        return _read_at_most(fd, size, max(0, end - size))
    finally:
        os.close(fd)


def read_json(path: Path, limit: int) -> dict[str, Any] | None:
    """The file's JSON object; None when it is absent, unsafe, over `limit`, torn or no object."""
    try:
        got = read_bounded(path, limit)
    except OSError:
        return None
    if got.over:
        return None
    try:
        data = json.loads(got.data)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def exists(path: Path) -> bool:
    """The name is there, whatever it is (lstat: a dangling link counts, nothing is opened)."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a fresh temporary name (never through a link or into a file someone else
    opened), mode 0600, then rename over `path` (which replaces a link, never follows it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)  # whatever the umask
            _write_all(fd, data, 0)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        # A full disk, say: what was written of it goes, so the failure takes no room.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        view = view[os.pwrite(fd, view, offset + len(data) - len(view)) :]


def write_into_room(room: Path, path: Path, data: bytes) -> bool:
    """Write `data` into `room`, a file of zeros set aside earlier (its blocks are taken, so a
    disk that filled up since cannot refuse the write), cut it to size and rename it to `path`.
    False, with nothing done, when there is no such room or it is too small: write `path`
    otherwise then. Never through a link, into anything but a regular file, nor into a file
    with another name (a hard link the job made to a file of its user's)."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(room, flags)
    except OSError:
        return False
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1 or found.st_size < len(data):
            return False
        _write_all(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    os.replace(room, path)
    return True


def open_append(path: Path) -> int:
    """A descriptor to append to `path` (created 0600), refusing a link or anything but a file."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, f"{path.name} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def touch(path: Path) -> None:
    """Create `path` (0600) if absent; a link or FIFO in its place is left as it is."""
    with contextlib.suppress(OSError):
        os.close(open_append(path))


def make_private_dir(path: Path, *, exist_ok: bool = False) -> None:
    """mkdir with mode 0700 whatever the umask. FileExistsError unless `exist_ok`."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not exist_ok:
            raise
    os.chmod(path, DIR_MODE)
