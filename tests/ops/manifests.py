"""Rendered YAML read back, as `kubectl apply` would read it."""

from __future__ import annotations

import yaml

from elasticityops.ops.yaml_docs import Manifest


def load_documents(text: str) -> list[Manifest]:
    """The inverse of `dump_documents` (comments are lost)."""
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]
