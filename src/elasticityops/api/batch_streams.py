"""How many batch event streams (api/batch_events.py) each token holds open on this replica,
held to the console's stream limits (api/console/stream_slots.py decides)."""

from __future__ import annotations

from collections import Counter

from elasticityops.api.console.feed import TooManyStreams
from elasticityops.api.console.stream_slots import Holder, refusal


class BatchStreams:
    """Open batch streams on this replica, by token: held to the console's limits."""

    def __init__(self) -> None:
        self._held: Counter[str] = Counter()

    def open(self, holder: Holder, max_streams: int, per_token: int) -> None:
        refused = refusal(holder, self._held, sum(self._held.values()), max_streams, per_token)
        if refused is not None:
            raise TooManyStreams(refused.replace("close a console tab", "close a stream"), retry_after=5)
        self._held[holder.token_id] += 1

    def close(self, holder: Holder) -> None:
        self._held[holder.token_id] -= 1
        if self._held[holder.token_id] <= 0:
            del self._held[holder.token_id]
