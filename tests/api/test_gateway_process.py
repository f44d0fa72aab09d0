"""The gateway's own files and process: one gateway per data dir and per SQLite file, files
private whatever the umask, the port checked and bound before anything is started or said."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.server import EOPS, HOST, REPO, base_env, free_port, running_server


def _serve(data_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`eops serve` that is expected to stop by itself (refused)."""
    return subprocess.run(
        [EOPS, "serve", "--host", HOST, "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=base_env(),
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def _started(data_dir: Path, port: int) -> subprocess.Popen[str]:
    """`eops serve` left running, its output (stdout and stderr) in one text pipe."""
    return subprocess.Popen(
        [EOPS, "serve", "--host", HOST, "--port", str(port), "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=base_env(),
        stdin=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_second_gateway_on_the_same_data_dir_refuses_naming_the_pid(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as first:
        second = _serve(tmp_path / "data", "--port", str(free_port()))
        assert second.returncode != 0, second.stdout + second.stderr
        assert f"another gateway (PID {first.pid})" in second.stderr
        assert "EOPS_TOKEN" not in second.stdout, "refused before announcing anything"
        assert "Traceback" not in second.stderr
        # The same SQLite file through --database-url, from another data dir.
        url = f"sqlite:///{tmp_path / 'data' / 'eops.db'}"
        third = _serve(tmp_path / "other", "--port", str(free_port()), "--database-url", url)
        assert third.returncode != 0, third.stdout + third.stderr
        assert f"another gateway (PID {first.pid}) is running on the database" in third.stderr
        with first.client() as client:
            assert client.get("/readyz").status_code == 200, "the first one is untouched"


def test_the_lock_goes_with_the_process(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as first:
        first.kill()  # no clean-up at all: the kernel drops the lock
        again = first.again()
    again.stop()


def test_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    port = free_port()
    with _umask(0o022):
        process = _started(data, port)
    try:
        _ready(f"http://{HOST}:{port}", process)
        assert _mode(data) == 0o700
        for name in ("eops.db", "eops.db-wal", "eops.db-shm", "admin-token", "gateway.lock"):
            assert _mode(data / name) == 0o600, name
        # The callback secret is the database's now (docs/high-availability.md): no file for it.
        assert not (data / "server-secret").exists()
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert "readable by other users" not in output


def test_an_open_data_dir_is_warned_about(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    with running_server(data) as server:
        output = server.output()
    assert f"the data dir {data} is readable by other users (mode 0755)" in output


def _ready(url: str, process: subprocess.Popen[str], within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"not ready at {url}")


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: str) -> None:
    result = _serve(tmp_path / "data", "--port", port)
    assert result.returncode == 2
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_port_0_prints_and_uses_the_port_bound(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process = _started(data, 0)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        found = re.search(r"on http://127\.0\.0\.1:(\d+) ", banner)
        assert found, banner
        port = int(found.group(1))
        assert port != 0
        lines = [process.stdout.readline() for _ in range(4)]
        assert f"  export EOPS_URL=http://{HOST}:{port}\n" in lines, "the callback URL too"
        _ready(f"http://{HOST}:{port}", process)
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_busy_port_fails_before_start_up_and_before_the_banner(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve(data, "--port", str(port))
    assert result.returncode == 1
    assert f"cannot listen on {HOST}:{port}" in result.stderr
    assert "EOPS_TOKEN" not in result.stdout + result.stderr, "no banner, no token"
    assert not (data / "eops.db").exists(), "no start-up (migration, adoption) ran"
    assert not (data / "admin-token").exists()


def test_a_data_dir_that_cannot_be_made_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    result = _serve(Path("/proc/eops-no-such-dir"), "--port", str(free_port()))
    assert result.returncode == 2
    assert "cannot create /proc/eops-no-such-dir" in result.stderr
    assert "Traceback" not in result.stderr
