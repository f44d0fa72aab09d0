"""The run-dir file reader: no links (of the file or its directory), regular files only, never
blocked by a FIFO, bounded while reading whatever size a file reports."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from elasticityops.backends.local import safefile
from helpers.small_disk import fill, small_tmpfs


def test_a_regular_file_is_read_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "result"
    path.write_bytes(b"x" * 10)
    assert safefile.read_bounded(path, 10) == safefile.Bounded(b"x" * 10, over=False)
    assert safefile.read_bounded(path, 4) == safefile.Bounded(b"xxxx", over=True)
    with pytest.raises(FileNotFoundError):
        safefile.read_bounded(tmp_path / "absent", 10)


@pytest.mark.parametrize("target", ["/proc/self/environ", "/dev/zero", "outside"])
def test_a_symlink_is_never_followed(tmp_path: Path, target: str) -> None:
    if target == "outside":
        outside = tmp_path / "outside"
        outside.write_text("secret")
        target = str(outside)
    run = tmp_path / "run"
    run.mkdir()
    (run / "result").symlink_to(target)
    with pytest.raises(safefile.UnsafeFile, match="symbolic link"):
        safefile.read_bounded(run / "result", 1024)
    assert safefile.read_chunk(run / "result", 0, 1024) == b""
    assert safefile.read_json(run / "result", 1024) is None


def test_a_linked_run_dir_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "exit.json").write_text("{}")
    (tmp_path / "run").symlink_to(real)
    with pytest.raises(safefile.UnsafeFile):
        safefile.read_bounded(tmp_path / "run" / "exit.json", 1024)


def test_a_fifo_neither_blocks_nor_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "result"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            safefile.read_bounded(fifo, 1024)
        except BaseException as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    blocked = not done.wait(2)
    if blocked:  # unblock the thread before failing
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
    assert not blocked, "opening a FIFO blocked"
    assert isinstance(errors[0], safefile.UnsafeFile)
    assert "FIFO" in str(errors[0])


def test_a_file_that_reports_size_zero_is_still_bounded() -> None:
    # /proc files are regular files that report size 0 however much they hold.
    status = Path(f"/proc/{os.getpid()}/status")
    assert status.stat().st_size == 0
    got = safefile.read_bounded(status, 100)
    assert got.over
    assert len(got.data) == 100


def test_writes_are_private_and_never_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    run = tmp_path / "run"
    safefile.make_private_dir(run)
    (run / ".exit.json.tmp").symlink_to(victim)  # planted where the temporary file goes
    safefile.write_atomic(run / "exit.json", b"{}")
    assert victim.read_text() == "untouched"
    assert (run / "exit.json").read_bytes() == b"{}"
    assert stat.S_IMODE((run / "exit.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    (run / "log").symlink_to(victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        safefile.open_append(run / "log")


def test_a_record_goes_into_the_room_set_aside_for_it(tmp_path: Path) -> None:
    room, path = tmp_path / ".exit.json.room", tmp_path / "exit.json"
    safefile.write_atomic(room, bytes(64))
    assert safefile.write_into_room(room, path, b'{"exit_code": 0}')
    assert path.read_bytes() == b'{"exit_code": 0}'
    assert not room.exists()
    assert not safefile.write_into_room(room, path, b"{}"), "a room serves once"


def test_a_room_too_small_a_link_or_a_hard_link_is_not_written(tmp_path: Path) -> None:
    room, path = tmp_path / ".exit.json.room", tmp_path / "exit.json"
    safefile.write_atomic(room, bytes(4))
    assert not safefile.write_into_room(room, path, b'{"exit_code": 0}')
    room.unlink()
    victim = tmp_path / "victim"
    victim.write_bytes(bytes(64))  # a file of the user's, the room's size
    room.symlink_to(victim)
    assert not safefile.write_into_room(room, path, b"{}")
    room.unlink()
    os.link(victim, room)
    assert not safefile.write_into_room(room, path, b"{}")
    assert victim.read_bytes() == bytes(64)
    assert not path.exists()


def test_a_write_the_full_disk_refuses_leaves_nothing_but_the_room_still_serves(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        room = disk / ".exit.json.room"
        safefile.write_atomic(room, bytes(4096))
        filler = fill(disk)
        with pytest.raises(OSError, match=os.strerror(errno.ENOSPC)):
            safefile.write_atomic(disk / "exit.json", b"x" * 8192)
        assert sorted(p.name for p in disk.iterdir()) == sorted([room.name, filler.name])
        assert safefile.write_into_room(room, disk / "exit.json", b'{"lost": true}')
        assert (disk / "exit.json").read_bytes() == b'{"lost": true}'
