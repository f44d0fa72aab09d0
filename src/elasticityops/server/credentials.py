"""The gateway's secrets: the key callback tokens derive from (kept in the database, shared by
every replica) and the operator's admin token (kept in the data dir, mode 0600)."""

from __future__ import annotations

import secrets
from pathlib import Path

from elasticityops.api.auth import hash_token, new_token
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.ports import Housekeeping, TokenStore
from elasticityops.domain.tokens import Scope
from elasticityops.server.data_dir import prepare_data_dir, write_private
from elasticityops.store.sql import SqlStore

SECRET_FILE = "server-secret"
ADMIN_TOKEN_FILE = "admin-token"
CALLBACK_SECRET = "callback"


async def server_secret(store: Housekeeping, data_dir: Path, clock: Clock) -> bytes:
    """The key that per-invocation callback tokens are derived from: one for every replica on
    the database (each derives the tokens of jobs another launched), made by the first to start
    and kept, so jobs adopted after a restart keep valid tokens. A data dir with the
    `server-secret` file of a release that kept it there gives its value to a database that
    has none yet, so the jobs that release launched keep theirs; after that the database's wins
    (the file is left in place, never written, for a rollback to find)."""
    kept = _old_secret_file(prepare_data_dir(data_dir) / SECRET_FILE)
    return await store.gateway_secret(CALLBACK_SECRET, kept or secrets.token_bytes(32), clock.now())


def _old_secret_file(path: Path) -> bytes | None:
    try:
        value = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / EOPS_DATA_DIR",
                    f"cannot read {path} ({exc.strerror or exc})",
                    "make it readable by the gateway's user, or remove it if this database's "
                    "gateways never used it",
                )
            ]
        ) from None
    return value or None


async def create_token(store: TokenStore, name: str, clock: Clock, *, scope: Scope = Scope.admin) -> str:
    token, _ = await new_token(store, name, clock, scope=scope)
    return token


async def admin_token(store: SqlStore, data_dir: Path, clock: Clock) -> tuple[str, bool]:
    """The admin token (scope admin, no expiry) kept (mode 0600) in the data dir for the
    operator; (token, created). The database holds only its hash; one revoked is made anew."""
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        token = path.read_text().strip()
        found = await store.check_api_token(hash_token(token))
        if found is not None and found.scope is Scope.admin and not found.expired(clock.now()):
            return token, False
        path.unlink()  # revoked, or left from another database (e.g. EOPS_DATABASE_URL changed)
    token = await create_token(store, "admin", clock)
    write_private(path, token.encode())
    return token, True
