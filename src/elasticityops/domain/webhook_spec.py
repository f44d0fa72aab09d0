"""`webhook:` of a function spec (or one invocation's override of it): where events go, which
ones, and whether the result comes with the end. Apart from domain/webhooks.py, which needs the
invocation, so that the function spec can hold it without an import cycle."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from elasticityops.domain.webhook_addresses import MAX_URL_CHARS, url_problem


class WebhookEvent(StrEnum):
    """What a webhook may ask for."""

    started = "started"  # the invocation's job started (each attempt's)
    completed = "completed"  # it ended: succeeded, failed, cancelled or timed_out
    batch_completed = "batch.completed"  # the last invocation of its batch ended (once per batch)

    @property
    def message_type(self) -> str:
        return MESSAGE_TYPES[self]


MESSAGE_TYPES = {
    WebhookEvent.started: "invocation.started",
    WebhookEvent.completed: "invocation.completed",
    WebhookEvent.batch_completed: "batch.completed",
}


class WebhookFormat(StrEnum):
    """How a message is laid out; both are signed as Standard Webhooks says."""

    standard = "standard"  # Standard Webhooks' body: {type, timestamp, data}
    cloudevents = "cloudevents"  # CloudEvents' HTTP binding, binary mode: ce-* headers, data as the body


class WebhookSpec(BaseModel):
    """`webhook:` of a function spec, or one invocation's override of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        max_length=MAX_URL_CHARS,
        strict=True,
        description="where events are POSTed: an https (or http) URL without user:password; the "
        "gateway refuses private, loopback and link-local addresses (docs/security.md)",
    )
    events: list[WebhookEvent] = Field(
        default_factory=lambda: [WebhookEvent.completed],
        min_length=1,
        strict=False,
        description="which events: started, completed, batch.completed (default: [completed])",
    )
    include_result: StrictBool = Field(
        False, description="whether invocation.completed carries the invocation's result"
    )
    format: WebhookFormat = Field(
        WebhookFormat.standard,
        description="standard: a JSON body {type, timestamp, data}; cloudevents: CloudEvents 1.0 "
        "over HTTP in binary mode (ce-id, ce-type, ce-source, ce-subject, ce-time headers; the "
        "data as the body). Both carry the webhook-* signature headers",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        # Literal private addresses are refused where the gateway's --webhook-allow-private is
        # known (api/webhook_params.py); here only what is never a webhook's URL.
        problem = url_problem(value, allow_private=True)
        if problem is not None:
            raise ValueError(f"{problem[0]}; {problem[1]}")
        return value

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[WebhookEvent]) -> list[WebhookEvent]:
        if len(set(value)) != len(value):
            raise ValueError("names an event twice; name each once")
        return value

    def wants(self, event: WebhookEvent) -> bool:
        return event in self.events
