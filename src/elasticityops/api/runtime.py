"""What the routes work with: the parts of a running gateway, built by server.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from elasticityops.api.auth import TokenChecker
from elasticityops.api.metrics import Metrics
from elasticityops.dispatch.functions import FunctionCache
from elasticityops.dispatch.hub import ChangeHub
from elasticityops.domain.clock import Clock
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import Backend, Store
from elasticityops.elasticity.controller import HeadroomController
from elasticityops.settings import Settings


class DispatcherControl(Protocol):
    """The part of the dispatcher the API uses."""

    @property
    def running(self) -> bool: ...

    async def cancel(self, invocation_id: str) -> Invocation: ...


@dataclass
class Runtime:
    settings: Settings
    store: Store
    hub: ChangeHub
    backend: Backend
    dispatcher: DispatcherControl
    clock: Clock
    server_secret: bytes
    tokens: TokenChecker
    functions: FunctionCache
    metrics: Metrics = field(default_factory=Metrics)
    headroom: HeadroomController | None = None
