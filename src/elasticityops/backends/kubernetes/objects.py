"""What a Kubernetes object is to ElasticityOps: the API server's JSON, decoded into plain dicts.

One definition, imported by the client, the builders, the observers, the doctor and the dev
cluster (no typed models: see docs/kubernetes.md, "The client: why this one")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

KubeObject = dict[str, Any]
"""One object (a Job, a Pod, a Status, a list document) as the API server sent it."""


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time as the API server writes it (2026-12-01T16:41:17Z); None when absent or
    not a time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def epoch(value: object) -> float | None:
    """`parse_time` in epoch seconds (a time without a zone counts as UTC)."""
    parsed = parse_time(value)
    if parsed is None:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
