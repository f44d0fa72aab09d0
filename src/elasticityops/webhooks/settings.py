"""The webhook deliverer's knobs (`eops serve --webhook-*`, EOPS_WEBHOOK_*)."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.domain.webhook_delivery import RetryPolicy
from elasticityops.knobs import knob


@dataclass(frozen=True)
class WebhookSettings:
    allow_private: bool = knob(
        False,
        env="EOPS_WEBHOOK_ALLOW_PRIVATE",
        flag="webhook-allow-private",
        help="Let webhooks go to loopback, private, link-local and other non-public addresses "
        "(a receiver on this machine or its network, tests); off, such URLs are refused at deploy "
        "and invoke, and a host that resolves to one is refused at delivery.",
    )
    retry_initial_s: float = knob(
        5.0,
        env="EOPS_WEBHOOK_RETRY_INITIAL",
        flag="webhook-retry-initial",
        unit="seconds",
        gt=0,
        le=3600,
        help="How long after a failed delivery it is tried again; each next wait doubles.",
    )
    retry_max_s: float = knob(
        3600.0,
        env="EOPS_WEBHOOK_RETRY_MAX",
        flag="webhook-retry-max",
        unit="seconds",
        gt=0,
        le=86_400,
        help="The longest wait between two delivery attempts of one message.",
    )
    give_up_after_s: float = knob(
        86_400.0,
        env="EOPS_WEBHOOK_GIVE_UP_AFTER",
        flag="webhook-give-up-after",
        unit="seconds",
        gt=0,
        le=30 * 86_400,
        help="How long after its event a message is still tried; after that it is marked failed.",
    )
    concurrency: int = knob(
        16,
        env="EOPS_WEBHOOK_CONCURRENCY",
        flag="webhook-concurrency",
        ge=1,
        le=1000,
        help="The most delivery attempts in flight at once.",
    )
    timeout_s: float = knob(
        10.0,
        env="EOPS_WEBHOOK_TIMEOUT",
        flag="webhook-timeout",
        unit="seconds",
        gt=0,
        le=300,
        help="How long one delivery attempt may take to connect, and to send and read its answer.",
    )
    poll_s: float = knob(
        1.0,
        env="EOPS_WEBHOOK_POLL_SECONDS",
        flag="webhook-poll",
        unit="seconds",
        gt=0,
        le=3600,
        help="How often the leader looks for messages due (a transition on it wakes it at once).",
    )

    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.retry_initial_s, self.retry_max_s, self.give_up_after_s)
