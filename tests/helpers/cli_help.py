"""What a command's `--help` shows, read back from Rich's option table."""

from __future__ import annotations

import re


def option_rows(help_text: str) -> dict[str, str]:
    """Option rows of Rich's help by their first flag (with a wide terminal, one line each)."""
    rows = {}
    for line in help_text.splitlines():
        found = re.match(r"│ (--[a-z0-9-]+)", line)
        if found:
            rows[found.group(1)] = line
    return rows
