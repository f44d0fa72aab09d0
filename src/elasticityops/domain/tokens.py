"""API tokens as the gateway knows them: an id, a label, a scope and an optional expiry. The
token itself is never kept; the store holds its sha256 hash, and the id is the first hex digits
of that hash, so every token has one (those made before ids existed too) without a column."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from elasticityops.domain.errors import FieldProblem, InvalidInput

TOKEN_ID_PREFIX = "tok-"
TOKEN_ID_HEX = 12  # 48 bits of the hash: unique among any number of tokens one gateway has


class Scope(StrEnum):
    """What a token may do. `admin` may do everything; `invoke` may invoke, read and cancel."""

    admin = "admin"
    invoke = "invoke"

    def allows(self, needed: Scope) -> bool:
        return self is Scope.admin or self is needed


@dataclass(frozen=True)
class ApiToken:
    id: str
    name: str
    scope: Scope
    created_at: datetime
    expires_at: datetime | None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at


# Control and format characters, line and paragraph separators: a name holding one prints as a
# terminal escape sequence, a fake table row or reversed text wherever it is listed.
_UNPRINTABLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def check_token_name(name: str, field: str = "name") -> str:
    """A token's name as given, or InvalidInput naming the first character that cannot be shown."""
    for at, char in enumerate(name):
        if unicodedata.category(char) in _UNPRINTABLE:
            raise InvalidInput(
                [
                    FieldProblem(
                        field,
                        f"holds {char!r} (U+{ord(char):04X}) at position {at}, which cannot be shown",
                        "use letters, digits, spaces and punctuation",
                    )
                ]
            )
    return name


def token_id(token_hash: str) -> str:
    return TOKEN_ID_PREFIX + token_hash[:TOKEN_ID_HEX]


def is_token_id(text: str) -> bool:
    return re.fullmatch(rf"{TOKEN_ID_PREFIX}[0-9a-f]{{{TOKEN_ID_HEX}}}", text) is not None


_DURATION = re.compile(r"([0-9]{1,7})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_LIFETIME = timedelta(days=3650)


def parse_lifetime(text: str, field: str = "expires_in") -> timedelta:
    """`30d`, `12h`, `90m`, `3600s`, `2w`: a whole number and one unit, at least a second and at
    most ten years."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        fix = "write a whole number and a unit: 30d, 12h, 90m"
        raise InvalidInput([FieldProblem(field, f"{text!r} is not a duration", fix)])
    return lifetime_seconds(int(match[1]) * _UNIT_SECONDS[match[2]], field)


def lifetime_seconds(seconds: int, field: str = "expires_in_seconds") -> timedelta:
    lifetime = timedelta(seconds=seconds)
    if not timedelta(seconds=1) <= lifetime <= MAX_LIFETIME:
        raise InvalidInput([FieldProblem(field, f"{seconds}s is out of range", "use 1s to 3650d")])
    return lifetime
