"""Multi-document YAML with comments: rendered output has to explain itself to the reviewer who
applies it, and PyYAML drops comments, so they are written as a header above each document."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Document:
    """One YAML document and the comment printed above it (may be empty)."""

    body: Manifest
    comment: str = ""


def comment_block(text: str) -> str:
    """Each line of `text` as a `#` comment; blank lines stay visible as a bare `#`."""
    lines = text.strip("\n").splitlines()
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def dump_documents(documents: Sequence[Document], header: str = "") -> str:
    parts: list[str] = []
    for index, document in enumerate(documents):
        chunk = ""
        if index == 0 and header:
            chunk += comment_block(header)
        if document.comment:
            chunk += comment_block(document.comment)
        chunk += yaml.safe_dump(document.body, sort_keys=False, default_flow_style=False, width=100)
        parts.append(chunk)
    return "---\n".join(parts)
