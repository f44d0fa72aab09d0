"""The narrow seams between the pure core and the outside world: the store (store.py) and the
backends (backend.py).

Implementations: store/ (SQLite, PostgreSQL), backends/local (processes + GPU slots),
backends/kubernetes (Jobs). The dispatcher and the API only ever talk to these protocols."""

from elasticityops.domain.ports.backend import (
    Backend,
    ClientCounters,
    CountsClientFaults,
    EventSink,
    LaunchRequest,
)
from elasticityops.domain.ports.store import (
    BatchStore,
    CancelStore,
    Change,
    ClockReading,
    FunctionRecord,
    FunctionStore,
    Housekeeping,
    InvocationRecords,
    InvocationStore,
    LedgerStore,
    LogKeeper,
    NewInvocation,
    NodeHistorySource,
    Page,
    PayloadSource,
    SpecChange,
    Store,
    TokenStore,
    TransitionStore,
    WebhookStore,
)

__all__ = [
    "Backend",
    "BatchStore",
    "CancelStore",
    "Change",
    "ClientCounters",
    "ClockReading",
    "CountsClientFaults",
    "EventSink",
    "FunctionRecord",
    "FunctionStore",
    "Housekeeping",
    "InvocationRecords",
    "InvocationStore",
    "LaunchRequest",
    "LedgerStore",
    "LogKeeper",
    "NewInvocation",
    "NodeHistorySource",
    "Page",
    "PayloadSource",
    "SpecChange",
    "Store",
    "TokenStore",
    "TransitionStore",
    "WebhookStore",
]
