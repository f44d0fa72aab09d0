"""Webhook URLs where they come in: a deploy's `webhook.url` and an invocation's override in the
invoke route's query (`?webhook=URL&webhook_events=started,completed&webhook_include_result=true`),
checked against the gateway's --webhook-allow-private, refused with 422 naming the field."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import ValidationError

from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.functions import problems_from_validation
from elasticityops.domain.webhook_addresses import url_problem
from elasticityops.domain.webhook_signing import SECRET_BYTES, new_secret
from elasticityops.domain.webhook_spec import WebhookSpec

URL_PARAM = "webhook"
EVENTS_PARAM = "webhook_events"
RESULT_PARAM = "webhook_include_result"
PARAMS = (URL_PARAM, EVENTS_PARAM, RESULT_PARAM)
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def fresh_secret() -> str:
    return new_secret(os.urandom(SECRET_BYTES))


def check_url(url: str, field: str, *, allow_private: bool) -> None:
    problem = url_problem(url, allow_private=allow_private)
    if problem is not None:
        raise InvalidInput([FieldProblem(field, *problem)])


def override(
    query: Mapping[str, str], spec_hook: WebhookSpec | None, *, allow_private: bool
) -> WebhookSpec | None:
    """The webhook of one invocation: its function's, with what the query overrides. Called
    only when the query names one of PARAMS (the hot path reads nothing more)."""
    url = query.get(URL_PARAM)
    if url is None and spec_hook is None:
        raise InvalidInput(
            [
                FieldProblem(
                    URL_PARAM,
                    f"{EVENTS_PARAM} or {RESULT_PARAM} given, but the function has no webhook",
                    f"add ?{URL_PARAM}=https://... (or give the function a webhook)",
                )
            ]
        )
    data: dict[str, object] = {} if spec_hook is None else spec_hook.model_dump(mode="json")
    if url is not None:
        data["url"] = url
    events = query.get(EVENTS_PARAM)
    if events is not None:
        data["events"] = [event.strip() for event in events.split(",") if event.strip()]
    include = query.get(RESULT_PARAM)
    if include is not None:
        if include.lower() not in _BOOLS:
            raise InvalidInput(
                [FieldProblem(RESULT_PARAM, f"{include!r} is not a boolean", "use true or false")]
            )
        data["include_result"] = _BOOLS[include.lower()]
    try:
        hook = WebhookSpec.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(exc, WebhookSpec)
        names = {"url": URL_PARAM, "events": EVENTS_PARAM, "include_result": RESULT_PARAM}
        raise InvalidInput(
            [FieldProblem(names.get(p.field.partition(".")[0], p.field), p.problem, p.fix) for p in problems]
        ) from None
    check_url(hook.url, URL_PARAM, allow_private=allow_private)
    return hook
