"""Findings: what every check returns (status, one-line explanation, the fix)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    passed = "pass"
    warn = "warn"
    fail = "fail"
    info = "info"


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    message: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "message": self.message, "fix": self.fix}


def names(items: Iterable[str], limit: int = 5) -> str:
    listed = list(items)
    shown = ", ".join(listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")
