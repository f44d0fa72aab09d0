"""Query parameters several routes read the same way."""

from __future__ import annotations

from datetime import datetime

from elasticityops.domain.errors import FieldProblem, InvalidInput


def aware_time(raw: str, field: str, fix: str, expected: str = "a time with its zone") -> datetime:
    """An ISO 8601 time with its zone (a trailing Z too); anything else is a 422 naming `field`.
    A time without a zone is refused rather than guessed: UTC and the caller's zone differ by hours."""
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidInput([FieldProblem(field, f"{raw!r} is not {expected}", fix)])
    return parsed
