"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl in a temp dir on a free
127.0.0.1 port, run as the `postgres` user when we are root (PostgreSQL refuses root), and
stopped by its PID. `scripts/test` installs PostgreSQL with apt when it is missing. The session's
server and a test's own are fixtures in tests/conftest.py (`postgres`, `own_postgres`)."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

# Below the kernel's ephemeral range: no other process takes the port in the seconds between
# the pick and the server's bind (initdb runs in between). bench/ imports it from here.
from elasticityops.devcluster.procs import free_port


class PostgresUnavailable(RuntimeError):
    pass


def _bindir() -> Path:
    for name in ("initdb", "pg_ctl"):
        found = shutil.which(name)
        if found:
            return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if candidates:
        return Path(candidates[-1]).parent
    raise PostgresUnavailable(
        "PostgreSQL is not installed (no initdb); install it with `apt-get install -y postgresql` "
        "or run scripts/test, which does"
    )


@dataclass
class PgCluster:
    host: str
    port: int
    user: str
    pid: int
    # what `restart` needs: the data dir, pg_ctl's -o options and log, the runuser prefix
    data: Path = Path()
    options: str = ""
    log: Path = Path()
    prefix: tuple[str, ...] = ()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={database}"

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: `immediate` aborts every connection and skips the shutdown
        checkpoint, as a crash does (the next start recovers from the WAL)."""
        _pg_ctl(self, "stop", "-m", mode)
        self.pid = 0

    def start(self) -> None:
        """Start it again on the same port and data dir; returns once it accepts connections."""
        _pg_ctl(self, "start", "-o", self.options, "-l", str(self.log))
        self.pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])


def _pg_ctl(cluster: PgCluster, *args: str) -> None:
    subprocess.run(
        [*cluster.prefix, str(_bindir() / "pg_ctl"), "-D", str(cluster.data), "-w", *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


@contextlib.contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    bindir = _bindir()
    root = Path(tempfile.mkdtemp(prefix="eops-pg-"))
    data = root / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable(
                "running as root and there is no `postgres` user to run the server"
            ) from None
        os.chown(root, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    pid = 0
    cluster: PgCluster | None = None
    try:
        subprocess.run(
            [*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "eops", "--no-sync"],
            check=True,
            capture_output=True,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        pid = int((data / "postmaster.pid").read_text().splitlines()[0])
        cluster = PgCluster("127.0.0.1", port, "eops", pid, data, options, root / "log", tuple(prefix))
        yield cluster
    finally:
        if cluster is not None:
            pid = cluster.pid  # a test may have restarted it
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # fast shutdown
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child is dead for our purposes; pg_ctl daemonized it, so it is not our child.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.split(") ", 1)[1].startswith("Z"):
            return False
    return True


_databases = itertools.count()


def create_database(cluster: PgCluster, name: str, template: str | None = None) -> str:
    """Create the database `name` on `cluster`, a copy of the database `template` if given; its
    URL."""
    copied = f" TEMPLATE {template}" if template else ""
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}{copied}")
    return cluster.url(name)


def fresh_database(cluster: PgCluster, template: str | None = None) -> str:
    """The URL of a new database on `cluster` (one per test: no test sees another's rows): empty,
    or a copy of the database `template`."""
    return create_database(cluster, f"eops_test_{os.getpid()}_{next(_databases)}", template)
