"""Times and durations as every table of the CLI prints them."""

from __future__ import annotations

from datetime import datetime


def day_time(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.3f}s"
    if value < 600:
        return f"{value:.1f}s"
    return f"{int(value) // 60}m{int(value) % 60:02d}s"
