"""Prometheus metrics of the gateway. State counts are read from the store at scrape time (so
they are right after a restart); latencies are observed as they happen."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.node_seconds import RunningTotal
from elasticityops.domain.ports import ClientCounters
from elasticityops.domain.retry import NODE_LOST

# Seconds: from a warm local slot (milliseconds) to a GPU node being provisioned (minutes).
_START_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800)
_RUN_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400)
_WRITES_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_ACCEPT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class ClientCollector:
    """The backend client's counters (the kubernetes backend's: API errors, retries, watch
    restarts) as Prometheus counters. The client owns the counts; a scrape hands the latest
    over (`render(client=...)`), so nothing is counted twice."""

    def __init__(self) -> None:
        self.latest: ClientCounters | None = None

    def collect(self) -> Iterator[Metric]:
        if self.latest is None:
            return
        errors = CounterMetricFamily(
            "eops_kube_api_errors",
            "Error answers of the Kubernetes API server by status code (429 throttled, 5xx, 410 "
            "expired), and failed connections (code=connection), retried or not",
            labels=["code"],
        )
        for code, count in sorted(self.latest.errors.items()):
            errors.add_metric([code], count)
        yield errors
        yield CounterMetricFamily(
            "eops_kube_api_retries",
            "Kubernetes API requests sent again after a 429 (after its Retry-After), a 5xx or a "
            "failed connection",
            value=self.latest.retries,
        )
        restarts = CounterMetricFamily(
            "eops_kube_watch_restarts",
            "Watches started again, by reason: ended (the server's timeout), expired (410 Gone, "
            "listed again), dropped (a failed connection or an error answer)",
            labels=["reason"],
        )
        for reason, count in sorted(self.latest.watch_restarts.items()):
            restarts.add_metric([reason], count)
        yield restarts
        yield CounterMetricFamily(
            "eops_kube_api_credential_refreshes",
            "Times the Kubernetes API server refused the gateway's credentials (401) and they were "
            "asked for again: a rotated service-account token read again, an exec plugin run again",
            value=self.latest.credential_refreshes,
        )


class NodeSecondsCollector(Collector):
    """The node-seconds counters, from the store's running totals (node_seconds_totals), set
    before each scrape: they count since the ledger began, so a restarted gateway (or another
    replica) exports the same values, and they only ever grow."""

    def __init__(self) -> None:
        self.totals: list[RunningTotal] = []

    def collect(self) -> Iterator[CounterMetricFamily]:
        seconds = CounterMetricFamily(
            "eops_invocation_node_seconds",
            "Node-seconds caused by invocations, by function, phase (provisioning, "
            "idle_before_start, run, idle_after; warm_unused: warm capacity no invocation used, "
            'function ""; run_again: the same attempt run once more in another MultiKueue worker), '
            "capacity (spot, on-demand, local: what the node was priced as) and "
            'cluster (MultiKueue\'s worker that ran it; "" with one cluster)',
            labels=["function", "phase", "capacity", "cluster"],
        )
        dollars = CounterMetricFamily(
            "eops_invocation_cost_dollars",
            "Cost of those node-seconds in USD, by function, capacity and cluster "
            "(machine_prices.json; unpriced machines count 0)",
            labels=["function", "capacity", "cluster"],
        )
        by_function: dict[tuple[str, str, str], float] = {}
        for total in self.totals:
            labels = [total.function, total.phase.value, total.capacity.value, total.cluster]
            seconds.add_metric(labels, total.seconds)
            key = (total.function, total.capacity.value, total.cluster)
            by_function[key] = by_function.get(key, 0.0) + total.usd
        for key, usd in by_function.items():
            dollars.add_metric(list(key), usd)
        yield seconds
        yield dollars


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.client = ClientCollector()
        self.registry.register(self.client)
        self.node_seconds = NodeSecondsCollector()
        self.registry.register(self.node_seconds)
        self.invocations = Gauge(
            "eops_invocations", "Invocations stored, by state", ["state"], registry=self.registry
        )
        self.queue_depth = Gauge(
            "eops_queue_depth", "Invocations waiting in state queued", registry=self.registry
        )
        self.gpus_in_use = Gauge(
            "eops_gpus_in_use", "GPUs held by pending or running invocations", registry=self.registry
        )
        self.gpus_free = Gauge(
            "eops_gpus_free",
            "GPUs that can start work now (-1: the backend has no fixed limit)",
            registry=self.registry,
        )
        self.gpus_in_use_by_type = Gauge(
            "eops_gpus_in_use_by_type",
            "GPUs held by pending or running invocations, by GPU type",
            ["gpu_type"],
            registry=self.registry,
        )
        self.gpu_nodes = Gauge(
            "eops_gpu_nodes",
            "GPU nodes by state (provisioning, ready, idle, scaling_down) and cluster (MultiKueue's "
            'worker whose nodes they are; "" for the gateway\'s own cluster), where the gateway '
            "watches GPU nodes",
            ["state", "cluster"],
            registry=self.registry,
        )
        self.gpu_budget_free = Gauge(
            "eops_gpu_budget_free",
            "GPUs the per-type GPU budget still allows, by GPU type (only the types it caps)",
            ["gpu_type"],
            registry=self.registry,
        )
        self.headroom_wanted = Gauge(
            "eops_headroom_wanted",
            "Warm units the headroom policy asks for, by shape (GPU type, count, CPU, memory)",
            ["shape", "gpu_type"],
            registry=self.registry,
        )
        self.headroom_held = Gauge(
            "eops_headroom_held",
            "Warm units held (what the GPU budget allows of what the policy asks), by shape",
            ["shape", "gpu_type"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "eops_leader",
            "1 on the replica that runs the dispatcher (the leader, or the only gateway), 0 on a follower",
            registry=self.registry,
        )
        self.time_to_start = Histogram(
            "eops_time_to_start_seconds",
            "From accepted to started",
            buckets=_START_BUCKETS,
            registry=self.registry,
        )
        self.duration = Histogram(
            "eops_invocation_duration_seconds",
            "From started to finished, by final state",
            ["state"],
            buckets=_RUN_BUCKETS,
            registry=self.registry,
        )
        self.accept_latency = Histogram(
            "eops_accept_latency_seconds",
            "From request to durably stored invocation",
            buckets=_ACCEPT_BUCKETS,
            registry=self.registry,
        )
        self.accepted = Counter(
            "eops_invocations_accepted",
            "Invocations accepted (new, not idempotent replays)",
            registry=self.registry,
        )
        self.preemptions = Counter(
            "eops_preemptions",
            "Invocations preempted for higher-priority work, by outcome: requeued (retries left) "
            "or failed (reason preempted)",
            ["outcome"],
            registry=self.registry,
        )
        self.lost_nodes = Counter(
            "eops_node_losses",
            "Invocations whose node was lost under them (spot reclaim, node deleted), by outcome: "
            "requeued (retries left) or failed (reason evicted)",
            ["outcome"],
            registry=self.registry,
        )
        self.webhook_deliveries = Counter(
            "eops_webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered (2xx), retry (failed, tried again "
            "after the back-off), failed (failed, and its retry window is over)",
            ["outcome"],
            registry=self.registry,
        )
        self.webhooks_pending = Gauge(
            "eops_webhooks_pending",
            "Webhook messages in the outbox not yet delivered nor failed",
            registry=self.registry,
        )

        self.commit_writes = Histogram(
            "eops_store_commit_writes",
            "Writes made durable by each store commit (group commit: one fsync for all of them)",
            buckets=_WRITES_BUCKETS,
            registry=self.registry,
        )

    def on_webhook_outcome(self, outcome: str) -> None:
        """Observer of webhook delivery attempts (webhooks/deliverer.py)."""
        self.webhook_deliveries.labels(outcome=outcome).inc()

    def on_commit(self, writes: int) -> None:
        """Observer of store commits (SqlStore.observe_commits); runs on the writer thread."""
        self.commit_writes.observe(writes)

    def on_transition(self, previous: State, after: Invocation) -> None:
        """Observer of committed transitions (SqlStore.observe_transitions)."""
        durations = after.timeline.durations()
        started_now = after.state is State.running or (
            after.state is State.succeeded and previous is not State.running
        )
        if started_now and durations["time_to_start"] is not None:
            self.time_to_start.observe(durations["time_to_start"])
        if after.state.terminal and durations["run"] is not None:
            self.duration.labels(state=after.state.value).observe(durations["run"])
        if previous in (State.pending, State.running):
            # A requeue's note says what took the attempt away (domain.retry writes one each time).
            node_lost = bool(after.notes) and after.notes[-1].kind == NODE_LOST
            if after.state is State.queued:
                (self.lost_nodes if node_lost else self.preemptions).labels(outcome="requeued").inc()
            elif after.state is State.failed and after.failure_reason is FailureReason.preempted:
                self.preemptions.labels(outcome="failed").inc()
            elif after.state is State.failed and node_lost:
                self.lost_nodes.labels(outcome="failed").inc()

    def render(
        self,
        counts: Mapping[State, int],
        in_use: Mapping[str, int],
        gpus_free: int | None,
        budget_free: Mapping[str, int] | None = None,
        headroom: Sequence[Mapping[str, object]] = (),
        *,
        leader: bool = True,
        client: ClientCounters | None = None,
        nodes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> bytes:
        """`in_use` GPUs held per type; `budget_free` what the per-type budget allows per type;
        `headroom` the controller's pools (controller.status_rows); `client` the backend
        client's counters (None: a backend that keeps none)."""
        self.client.latest = client
        for state in State:
            self.invocations.labels(state=state.value).set(counts.get(state, 0))
        self.queue_depth.set(counts.get(State.queued, 0))
        self.gpus_in_use.set(sum(in_use.values()))
        self.gpus_free.set(-1 if gpus_free is None else gpus_free)
        self.leader.set(1 if leader else 0)
        # Set afresh each scrape, so that a type no longer in use (nor capped) drops out instead of
        # keeping its last value; a capped type reads 0 when idle.
        self.gpus_in_use_by_type.clear()
        for gpu_type in {**dict.fromkeys(budget_free or {}, 0), **in_use}:
            self.gpus_in_use_by_type.labels(gpu_type=gpu_type).set(in_use.get(gpu_type, 0))
        self.gpu_nodes.clear()
        for cluster, by_state in (nodes or {}).items():
            for node_state, count in by_state.items():
                self.gpu_nodes.labels(state=node_state, cluster=cluster).set(count)
        self.gpu_budget_free.clear()
        for gpu_type, room in (budget_free or {}).items():
            self.gpu_budget_free.labels(gpu_type=gpu_type).set(room)
        self.headroom_wanted.clear()
        self.headroom_held.clear()
        for pool in headroom:
            labels = {"shape": str(pool["shape"]), "gpu_type": str(pool["gpu_type"])}
            self.headroom_wanted.labels(**labels).set(float(str(pool["wanted"])))
            self.headroom_held.labels(**labels).set(float(str(pool["held"])))
        return generate_latest(self.registry)
