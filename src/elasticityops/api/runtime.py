"""What the routes work with: the parts of a running gateway, built by server/app.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from elasticityops.api.auth import TokenChecker
from elasticityops.api.batch_streams import BatchStreams
from elasticityops.api.console.capacity import CapacityHistory
from elasticityops.api.console.feed import ConsoleFeed, FeedSettings
from elasticityops.api.console.session import SessionSettings
from elasticityops.api.held_open import Stopping
from elasticityops.api.metrics import Metrics
from elasticityops.api.settings import ApiSettings
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.changes.hub import ChangeHub
from elasticityops.changes.replicas import ReplicaSettings
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.clock import Clock
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import (
    Backend,
    BatchStore,
    FunctionStore,
    Housekeeping,
    InvocationStore,
    LedgerStore,
    TokenStore,
    TransitionStore,
    WebhookStore,
)
from elasticityops.ha.settings import LeaderElectionSettings
from elasticityops.headroom.controller import HeadroomController
from elasticityops.headroom.settings import HeadroomSettings
from elasticityops.webhooks.settings import WebhookSettings


class GatewaySettings(Protocol):
    """What the routes read of the gateway's settings: each component's own, as the aggregate
    that the composition root assembles (settings.py) holds them."""

    @property
    def backend(self) -> str: ...
    @property
    def api(self) -> ApiSettings: ...
    @property
    def dispatch(self) -> DispatchSettings: ...
    @property
    def headroom(self) -> HeadroomSettings: ...
    @property
    def leader(self) -> LeaderElectionSettings: ...
    @property
    def replicas(self) -> ReplicaSettings: ...
    @property
    def session(self) -> SessionSettings: ...
    @property
    def feed(self) -> FeedSettings: ...
    @property
    def webhooks(self) -> WebhookSettings: ...


class DispatcherControl(Protocol):
    """The part of the dispatcher the API uses."""

    @property
    def running(self) -> bool: ...

    async def cancel(self, invocation_id: str) -> Invocation: ...


class Leadership(Protocol):
    """The part of the leader elector the API reads (ha/elector.py)."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader(self) -> str: ...

    def observed_age(self) -> float | None: ...


class ApiStore(
    FunctionStore,
    InvocationStore,
    BatchStore,
    TransitionStore,
    LedgerStore,
    TokenStore,
    Housekeeping,
    WebhookStore,
    Protocol,
):
    """What the routes read and write (a cancel goes through the dispatcher)."""


@dataclass
class Runtime:
    settings: GatewaySettings
    store: ApiStore
    hub: ChangeHub
    backend: Backend
    dispatcher: DispatcherControl
    clock: Clock
    server_secret: bytes
    tokens: TokenChecker
    functions: FunctionCache
    feed: ConsoleFeed
    history: CapacityHistory
    metrics: Metrics = field(default_factory=Metrics)
    stopping: Stopping = field(default_factory=Stopping)
    """Set as the gateway begins to stop: what requests hold open lets go (api/held_open.py)."""
    headroom: HeadroomController | None = None
    batch_streams: BatchStreams = field(default_factory=BatchStreams)
    """The batch event streams open on this replica, by token (api/batch_events.py)."""
    election: Leadership | None = None
    """The leader elector with --leader-elect; None: this gateway is the only one, the leader."""

    @property
    def role(self) -> str:
        """leader (runs the dispatcher and headroom controller) or follower (serves the API)."""
        return "leader" if self.election is None or self.election.is_leader else "follower"

    @property
    def leader(self) -> str:
        """The identity of the leader as this replica last saw it ("" unknown or none)."""
        return "" if self.election is None else self.election.leader
