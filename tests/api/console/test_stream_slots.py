"""api/console/stream_slots.py: one token holds at most its share of the event streams, and
the last slot is kept for admin tokens, whatever invoke tokens open."""

from __future__ import annotations

import pytest

from elasticityops.api.console.stream_slots import Holder, refusal

ADMIN = Holder("tok-aaaaaaaaaaaa", admin=True)
INVOKER = Holder("tok-bbbbbbbbbbbb", admin=False)
OTHER = Holder("tok-cccccccccccc", admin=False)


@pytest.mark.parametrize(
    ("holder", "held", "open_now", "refused_for"),
    [
        pytest.param(INVOKER, {}, 0, None, id="the first stream"),
        pytest.param(INVOKER, {INVOKER.token_id: 1}, 1, None, id="within its share"),
        pytest.param(
            INVOKER, {INVOKER.token_id: 2}, 2, "EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN=2", id="its share"
        ),
        pytest.param(ADMIN, {ADMIN.token_id: 2}, 2, "EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN=2", id="admins too"),
        pytest.param(OTHER, {INVOKER.token_id: 2}, 2, None, id="another token's share is its own"),
        pytest.param(OTHER, {INVOKER.token_id: 2, "tok-d": 1}, 3, "kept for an admin", id="the last slot"),
        pytest.param(ADMIN, {INVOKER.token_id: 2, "tok-d": 1}, 3, None, id="an admin takes the last"),
        pytest.param(
            ADMIN, {INVOKER.token_id: 2, "tok-d": 2}, 4, "EOPS_CONSOLE_MAX_STREAMS=4", id="all full"
        ),
    ],
)
def test_who_may_open_one_more(
    holder: Holder, held: dict[str, int], open_now: int, refused_for: str | None
) -> None:
    refused = refusal(holder, held, open_now, max_streams=4, per_token=2)
    if refused_for is None:
        assert refused is None
    else:
        assert refused is not None
        assert refused_for in refused


def test_one_stream_in_all_is_an_admins() -> None:
    assert refusal(ADMIN, {}, 0, max_streams=1, per_token=2) is None
    refused = refusal(INVOKER, {}, 0, max_streams=1, per_token=2)
    assert refused is not None
    assert "kept for an admin" in refused
