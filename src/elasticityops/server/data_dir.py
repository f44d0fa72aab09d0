"""The data dir a gateway keeps its files in, made private, and the locks that keep a second
gateway off it (and off its SQLite database)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput
from elasticityops.settings import Settings

LOCK_FILE = "gateway.lock"
_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600


class AlreadyRunning(EopsError):
    """Another gateway holds the data dir's (or the SQLite database's) lock."""

    code = "already_running"


def prepare_data_dir(data_dir: Path) -> Path:
    """The data dir, made 0700 if it is not there (whatever the umask). One that cannot be made
    is an InvalidInput naming it, never an OSError."""
    if not data_dir.is_dir():
        try:
            data_dir.mkdir(parents=True, exist_ok=True, mode=_PRIVATE_DIR)
            data_dir.chmod(_PRIVATE_DIR)
        except OSError as exc:
            raise InvalidInput(
                [
                    FieldProblem(
                        "--data-dir / EOPS_DATA_DIR",
                        f"cannot create {data_dir} ({exc.strerror or exc})",
                        "choose a directory you can write",
                    )
                ]
            ) from None
    return data_dir


def data_dir_warning(data_dir: Path) -> str | None:
    """A warning when other users can read the data dir (it holds the database and tokens)."""
    try:
        mode = stat.S_IMODE(data_dir.stat().st_mode)
    except OSError:
        return None
    if mode & 0o077:
        return (
            f"warning: the data dir {data_dir} is readable by other users (mode {mode:04o}); "
            f"restrict it with `chmod 700 {data_dir}`"
        )
    return None


def sqlite_path(database_url: str) -> Path | None:
    """The file of a SQLite URL; None for another database or an in-memory one."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return None  # the store reports it when it opens
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).expanduser().resolve()


def private_database_file(database_url: str) -> None:
    """Create a SQLite database file 0600 before SQLite does (SQLite gives its WAL and shared
    memory files the database file's mode), and take group and world bits off one that exists
    with them, its WAL and shm files too."""
    path = sqlite_path(database_url)
    if path is None:
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE))
    except FileExistsError:
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(FileNotFoundError):
                if stat.S_IMODE(file.stat().st_mode) & 0o077:
                    file.chmod(_PRIVATE_FILE)
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--database-url / EOPS_DATABASE_URL",
                    f"cannot create {path} ({exc.strerror or exc})",
                    "choose a directory you can write",
                )
            ]
        ) from None


def _lock(path: Path, what: str) -> int:
    """An exclusive lock on `path` (made 0600), holding our PID, for as long as the returned
    descriptor stays open (the process's life: the kernel drops it when the process ends, however
    it ends)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, _PRIVATE_FILE)
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / --database-url",
                    f"cannot create {path} ({exc.strerror or exc})",
                    "choose a directory you can write",
                )
            ]
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", errors="replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another gateway (PID {holder}) is running on {what} (it holds {path}); stop it, "
            "or give this one another --data-dir / --database-url"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lock_gateway(settings: Settings) -> list[int]:
    """Lock the data dir and the SQLite database for this process, so that a second gateway
    on either refuses to start (two would each run their full share of GPU slots). PostgreSQL
    is shared by design (compare-and-set), so it is not locked. Keep the descriptors open."""
    data_dir = prepare_data_dir(settings.data_dir)
    fds = [_lock(data_dir / LOCK_FILE, f"the data dir {data_dir}")]
    database = sqlite_path(settings.database_url)
    try:
        if database is not None:
            fds.append(_lock(database.with_name(database.name + ".lock"), f"the database {database}"))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def write_private(path: Path, data: bytes) -> None:
    """Create `path` readable by its owner only; fails if it exists (no silent overwrite)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
