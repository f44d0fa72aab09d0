"""Text that came from someone else (a token's name, a job's message), made safe to print in a
table: every character that is not printable is shown as its escape (`\\x1b`, `\\n`, `\\u202e`),
so no terminal escape sequence, line break or reversed text reaches the screen from it."""

from __future__ import annotations


def shown(text: str) -> str:
    """`text` with each unprintable character replaced by its Python escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
