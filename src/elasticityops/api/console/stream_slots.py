"""Who may open one more event stream. A replica keeps few (EOPS_CONSOLE_MAX_STREAMS), so they
are shared: one token holds at most its share (EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN), and the
last slot is kept for admin tokens, so however many streams invoke tokens open, an admin can
still open the console. Pure: the feed counts, this decides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elasticityops.domain.tokens import ApiToken, Scope

ADMIN_RESERVE = 1  # slots invoke tokens never take


@dataclass(frozen=True)
class Holder:
    """Whose a stream is: a token's id, and whether it is an admin token."""

    token_id: str
    admin: bool

    @classmethod
    def of(cls, token: ApiToken) -> Holder:
        return cls(token.id, token.scope is Scope.admin)


def refusal(
    holder: Holder, held: Mapping[str, int], open_now: int, max_streams: int, per_token: int
) -> str | None:
    """Why `holder` may not open one more stream (the 503's message), or None: it may.
    `held`: streams open by token id; `open_now`: all streams open on this replica."""
    mine = held.get(holder.token_id, 0)
    if mine >= per_token:
        return (
            f"token {holder.token_id} holds {mine} event streams on this replica, its share "
            f"(EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN={per_token}); close a console tab or try again later"
        )
    if open_now >= max_streams:
        return (
            f"{open_now} event streams are open on this replica, the most it keeps "
            f"(EOPS_CONSOLE_MAX_STREAMS={max_streams}); close a console tab or try again later"
        )
    if not holder.admin and open_now >= max_streams - ADMIN_RESERVE:
        return (
            f"{open_now} event streams are open on this replica; the last of its {max_streams} "
            f"(EOPS_CONSOLE_MAX_STREAMS) is kept for an admin token; close a console tab or try "
            "again later"
        )
    return None
