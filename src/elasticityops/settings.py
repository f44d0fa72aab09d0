"""Typed settings of the gateway process, each with its unit and default stated once.

Read at the edge (CLI flags over `EOPS_*` environment variables over these defaults) and passed
down as these dataclasses; nothing deeper reads the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from elasticityops.backends.kubernetes.settings import KubernetesSettings, load_kubernetes_settings
from elasticityops.domain.errors import FieldProblem, InvalidInput

MIB = 1024 * 1024


def default_data_dir() -> Path:
    """`$EOPS_DATA_DIR`, else `~/.eops`: one place for the database, the server secret and
    the admin token, shared by `eops serve` and `eops token create`."""
    return Path(os.environ.get("EOPS_DATA_DIR") or Path.home() / ".eops")


@dataclass(frozen=True)
class StoreSettings:
    url: str = ""
    """SQLAlchemy URL. Empty: SQLite file `eops.db` in the data dir. PostgreSQL:
    `postgresql+psycopg://user:pass@host/db`. Env: EOPS_DATABASE_URL."""
    group_commit_max: int = 512
    """Most writes committed in one transaction (count). Env: EOPS_GROUP_COMMIT_MAX."""
    read_threads: int = 1
    """Threads serving reads (count). Each read is mostly Python work under the GIL, so more
    threads mainly contend with the event loop: in a 1,000-invocation burst one thread gave
    176 Jobs/s and 9.9 gateway CPU-s against ~145 Jobs/s and 10.6-12 CPU-s with four
    (bench/k8s_burst.py). Env: EOPS_STORE_READ_THREADS."""


@dataclass(frozen=True)
class ApiSettings:
    max_payload_bytes: int = 1 * MIB
    """Largest request body (bytes), for invocation payloads, function specs and results.
    Env: EOPS_MAX_PAYLOAD_BYTES."""
    max_wait_seconds: int = 900
    """Longest `?wait=` a caller may ask for (seconds). Env: EOPS_MAX_WAIT_SECONDS."""
    public_url: str = ""
    """URL jobs use to reach this gateway (result callback). Empty: http://HOST:PORT, with
    127.0.0.1 for a wildcard host. Env: EOPS_PUBLIC_URL."""


@dataclass(frozen=True)
class LocalOptions:
    """Options of the local backend that `eops serve` exposes (the backend's own settings
    dataclass, backends/local/settings.py, is built from these)."""

    gpus: int | None = None
    """GPU slots (count). Unset: one per NVIDIA GPU, else the backend's default of virtual
    slots. Env: EOPS_GPUS."""
    cold_start_seconds: float = 0.0
    """Provisioning delay before a cold slot's first use (seconds). Env: EOPS_COLD_START_SECONDS."""
    idle_release_seconds: float | None = None
    """Idle time after which a warm slot goes cold again (seconds); unset: never.
    Env: EOPS_IDLE_RELEASE_SECONDS."""


@dataclass(frozen=True)
class DispatchOptions:
    """Options of the dispatcher that `eops serve` exposes (the dispatcher's own settings,
    dispatch/dispatcher.py DispatchSettings, is built from these)."""

    tick_seconds: float = 1.0
    """Longest pause between two admission passes when nothing wakes the dispatcher (seconds).
    Env: EOPS_DISPATCH_TICK_SECONDS."""
    gpu_budget: int | None = None
    """Most GPUs in use at once across all functions (count); unset: no quota.
    Env: EOPS_GPU_BUDGET."""
    paused: bool = False
    """Accept and store invocations but admit none (maintenance; measuring the gateway alone).
    Env: EOPS_DISPATCH_PAUSED."""


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    """Address to listen on. Env: EOPS_HOST."""
    port: int = 8080
    """TCP port to listen on. Env: EOPS_PORT."""
    data_dir: Path = field(default_factory=default_data_dir)
    """Database, server secret and admin token live here. Env: EOPS_DATA_DIR."""
    backend: str = "local"
    """Where invocations run: local (processes + GPU slots) or a registered other backend.
    Env: EOPS_BACKEND."""
    log_level: str = "info"
    """uvicorn's log level. Env: EOPS_LOG_LEVEL."""
    store: StoreSettings = field(default_factory=StoreSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    local: LocalOptions = field(default_factory=LocalOptions)
    dispatch: DispatchOptions = field(default_factory=DispatchOptions)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    """The Kubernetes backend's settings (EOPS_KUBE_* variables, see its settings module)."""

    @property
    def database_url(self) -> str:
        return self.store.url or f"sqlite:///{self.data_dir / 'eops.db'}"

    @property
    def callback_base_url(self) -> str:
        if self.api.public_url:
            return self.api.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"


# env var -> (group or "" for the top level, field name)
_ENV: dict[str, tuple[str, str]] = {
    "EOPS_HOST": ("", "host"),
    "EOPS_PORT": ("", "port"),
    "EOPS_DATA_DIR": ("", "data_dir"),
    "EOPS_BACKEND": ("", "backend"),
    "EOPS_LOG_LEVEL": ("", "log_level"),
    "EOPS_DATABASE_URL": ("store", "url"),
    "EOPS_GROUP_COMMIT_MAX": ("store", "group_commit_max"),
    "EOPS_STORE_READ_THREADS": ("store", "read_threads"),
    "EOPS_MAX_PAYLOAD_BYTES": ("api", "max_payload_bytes"),
    "EOPS_MAX_WAIT_SECONDS": ("api", "max_wait_seconds"),
    "EOPS_PUBLIC_URL": ("api", "public_url"),
    "EOPS_GPUS": ("local", "gpus"),
    "EOPS_COLD_START_SECONDS": ("local", "cold_start_seconds"),
    "EOPS_IDLE_RELEASE_SECONDS": ("local", "idle_release_seconds"),
    "EOPS_DISPATCH_TICK_SECONDS": ("dispatch", "tick_seconds"),
    "EOPS_GPU_BUDGET": ("dispatch", "gpu_budget"),
    "EOPS_DISPATCH_PAUSED": ("dispatch", "paused"),
}
ENV_VARS = tuple(_ENV)


def _convert(kind: Any, raw: str, where: str) -> Any:
    text = str(kind)
    try:
        if "bool" in text:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(raw)
        if "int" in text:
            return None if raw == "" and "None" in text else int(raw)
        if "float" in text:
            return None if raw == "" and "None" in text else float(raw)
        if "Path" in text:
            return Path(raw).expanduser()
        return raw
    except ValueError:
        raise InvalidInput(
            [FieldProblem(where, f"{raw!r} is not a valid {text}", "set a value of that type")]
        ) from None


def _types(cls: type) -> dict[str, Any]:
    return {f.name: f.type for f in fields(cls)}


def load_settings(
    env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Defaults, then `EOPS_*` variables from `env`, then `overrides` (CLI flags; keys are
    `field` or `group.field`, None values are ignored)."""
    env = os.environ if env is None else env
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {
        "store": {},
        "api": {},
        "local": {},
        "dispatch": {},
        "kubernetes": {},
    }
    group_types = {
        "": _types(Settings),
        "store": _types(StoreSettings),
        "api": _types(ApiSettings),
        "local": _types(LocalOptions),
        "dispatch": _types(DispatchOptions),
    }
    for var, (group, name) in _ENV.items():
        if var in env:
            value = _convert(group_types[group][name], env[var], var)
            (groups[group] if group else top)[name] = value
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        group, _, name = key.rpartition(".")
        (groups[group] if group else top)[name] = value
    base = Settings()
    return replace(
        base,
        **top,
        store=replace(base.store, **groups["store"]),
        api=replace(base.api, **groups["api"]),
        local=replace(base.local, **groups["local"]),
        dispatch=replace(base.dispatch, **groups["dispatch"]),
        kubernetes=load_kubernetes_settings(env, groups["kubernetes"]),
    )
