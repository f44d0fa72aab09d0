"""Typed settings of the gateway process. Each knob is declared once, on the dataclass that uses it
(elasticityops/knobs.py): the store's, the API's, the local backend's, the dispatcher's and the
Kubernetes backend's own settings are nested here as they are, so nothing converts one into another.

Read at the edge (CLI flags over `EOPS_*` environment variables over the declared defaults) and
passed down; nothing deeper reads the environment. `eops serve --help` lists every knob."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from elasticityops.api.console.capacity import HistorySettings
from elasticityops.api.console.feed import FeedSettings
from elasticityops.api.console.session import SessionSettings
from elasticityops.api.settings import ApiSettings
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.worker_clusters import FLAG as WORKERS_FLAG
from elasticityops.backends.kubernetes.worker_clusters import parse_workers, unreadable
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.changes.replicas import ReplicaSettings
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.ha.settings import LeaderElectionSettings, timing_problems
from elasticityops.headroom.settings import HeadroomSettings, over_budget
from elasticityops.knobs import knob, knob_factory, load, spec
from elasticityops.store.settings import StoreSettings
from elasticityops.webhooks.settings import WebhookSettings


@dataclass(frozen=True)
class Settings:
    host: str = knob("127.0.0.1", env="EOPS_HOST", help="Address to listen on.")
    port: int = knob(
        8080, env="EOPS_PORT", ge=0, le=65535, help="TCP port to listen on; 0: any free one (printed)."
    )
    data_dir: Path = knob_factory(
        lambda: Path.home() / ".eops",
        env="EOPS_DATA_DIR",
        shown="~/.eops",
        help="Database, server secret and admin token live here.",
    )
    backend: str = knob(
        "local",
        env="EOPS_BACKEND",
        help="Where invocations run: local (processes and GPU slots) or kubernetes (one Job each).",
    )
    log_level: str = knob(
        "info",
        env="EOPS_LOG_LEVEL",
        choices=("critical", "error", "warning", "info", "debug"),
        help="Log level of the gateway and uvicorn.",
    )
    store: StoreSettings = field(default_factory=StoreSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    # Not knobs, filled in where the gateway is wired: the local backend's run_dir (DATA_DIR/runs,
    # server/backends.py), the dispatcher's server secret and callback URL (server/app.py).
    local: LocalBackendSettings = field(default_factory=lambda: LocalBackendSettings(run_dir=Path("runs")))
    dispatch: DispatchSettings = field(default_factory=lambda: DispatchSettings(server_secret=b""))
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    headroom: HeadroomSettings = field(default_factory=HeadroomSettings)
    leader: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    replicas: ReplicaSettings = field(default_factory=ReplicaSettings)
    # The web console (/ui): its sessions, its event streams, its capacity chart.
    session: SessionSettings = field(default_factory=SessionSettings)
    feed: FeedSettings = field(default_factory=FeedSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)

    @property
    def database_url(self) -> str:
        return self.store.url or f"sqlite:///{self.data_dir / 'eops.db'}"

    @property
    def callback_base_url(self) -> str:
        if self.api.public_url:
            return self.api.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:  # an IPv6 address goes in brackets in a URL
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


# Variables that are gone, and what replaces them: setting one stops start-up instead of being
# silently ignored.
REMOVED_ENV = {
    "EOPS_KUBE_MAX_GPUS": (
        spec(Settings, "gpu-budget"),
        "the one GPU cap, the most GPUs in use at once across all functions, for every backend",
    ),
}


def load_settings(env: Mapping[str, str] | None = None, given: Mapping[str, Any] | None = None) -> Settings:
    """The declared defaults, then the `EOPS_*` variables in `env` (default: the process's), then
    `given`: values by knob name, as flags typed on the command line (e.g. {"port": "9000"})."""
    env = os.environ if env is None else env
    gone = [
        FieldProblem(var, "is no longer read", f"set {new.env} ({new.flag}) instead: {what}")
        for var, (new, what) in REMOVED_ENV.items()
        if var in env
    ]
    if gone:
        raise InvalidInput(gone)
    settings = load(Settings(), env, given)
    too_much = over_budget(settings.headroom.policy(), settings.dispatch.gpu_budget)
    if too_much is not None:
        raise InvalidInput([FieldProblem("--headroom", too_much, "e.g. --headroom warm:2 --gpu-budget 8")])
    election = election_problems(settings)
    if election:
        raise InvalidInput(election)
    kueue = kueue_problems(settings)
    if kueue:
        raise InvalidInput(kueue)
    return with_local_queue(settings)


DEFAULT_LOCAL_QUEUE = "eops"  # `eops render kueue`'s default LocalQueue
_ADMISSION = "--admission / EOPS_ADMISSION"


def kueue_problems(settings: Settings) -> list[FieldProblem]:
    """Why these settings cannot dispatch as they say through Kueue (none for gateway
    admission, unless a LocalQueue is named without it)."""
    kube = settings.kubernetes
    if settings.dispatch.admission != "kueue":
        if kube.workers:
            return [
                FieldProblem(
                    WORKERS_FLAG,
                    "names MultiKueue's worker clusters, but the gateway admits by itself",
                    "add --admission kueue (the manager cluster's Kueue dispatches to the workers)",
                )
            ]
        if kube.local_queue is not None:
            return [
                FieldProblem(
                    "--kube-local-queue / EOPS_KUBE_LOCAL_QUEUE",
                    "names a Kueue LocalQueue, but the gateway admits by itself",
                    "add --admission kueue, or drop --kube-local-queue",
                )
            ]
        return [_NOMINATE_ALONE] if kube.nominate_wait_s > 0 else []
    problems = []
    if settings.backend != "kubernetes":
        problems.append(
            FieldProblem(
                _ADMISSION,
                f"Kueue admits Kubernetes Jobs, and the {settings.backend} backend makes none",
                "add --backend kubernetes, or use --admission gateway",
            )
        )
    if settings.dispatch.gpu_budget is not None:
        problems.append(
            FieldProblem(
                "--gpu-budget / EOPS_GPU_BUDGET",
                "with --admission kueue the ClusterQueue's quota is the one GPU cap (one owner of "
                "quota: Kueue)",
                "drop --gpu-budget and set the quota with `eops render kueue --gpu-budget TYPE=N`",
            )
        )
    if kube.workload != "job":
        problems.append(
            FieldProblem(
                "--kube-workload / EOPS_KUBE_WORKLOAD",
                "Kueue admits the gateway's Jobs; bare pods are not submitted to it",
                "use --kube-workload job with --admission kueue",
            )
        )
    workers, wrong = parse_workers(kube.workers)
    if kube.nominate_wait_s > 0 and not workers:
        problems.append(_NOMINATE_ALONE)
    return problems + wrong + unreadable(workers)


_NOMINATE_ALONE = FieldProblem(
    "--kube-nominate-wait / EOPS_KUBE_NOMINATE_WAIT",
    "makes the gateway MultiKueue's dispatcher, but no worker clusters are named",
    "add --admission kueue and --kube-workers NAME=KUBECONFIG,..., or leave --kube-nominate-wait at 0",
)


def with_local_queue(settings: Settings) -> Settings:
    """Kueue admission submits to `DEFAULT_LOCAL_QUEUE` unless told another."""
    if settings.dispatch.admission != "kueue" or settings.kubernetes.local_queue is not None:
        return settings
    return replace(settings, kubernetes=replace(settings.kubernetes, local_queue=DEFAULT_LOCAL_QUEUE))


_LEADER_ELECT = "--leader-elect / EOPS_LEADER_ELECT"


def election_problems(settings: Settings) -> list[FieldProblem]:
    """Why these settings cannot run as one of several replicas (none without --leader-elect)."""
    if not settings.leader.leader_elect:
        return []
    problems = []
    if settings.backend != "kubernetes":
        problems.append(
            FieldProblem(
                _LEADER_ELECT,
                f"leader election is for --backend kubernetes, not {settings.backend}: the local backend "
                "runs one machine's processes on its GPU slots, and its data dir is locked by one gateway",
                "run one gateway without --leader-elect, or use --backend kubernetes",
            )
        )
    scheme = settings.database_url.partition(":")[0].partition("+")[0].lower()
    if scheme == "sqlite":
        problems.append(
            FieldProblem(
                _LEADER_ELECT,
                "leader election needs a database all replicas share, and SQLite is one file, locked "
                "by one gateway",
                "set --database-url postgresql+psycopg://USER:PASSWORD@HOST/DB on every replica",
            )
        )
    return problems + timing_problems(settings.leader)
