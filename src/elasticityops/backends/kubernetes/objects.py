"""What a Kubernetes object is to ElasticityOps: the API server's JSON, decoded into plain dicts.

One definition, imported by the client, the builders, the observers, the doctor and the dev
cluster (no typed models: see docs/kubernetes.md, "The client: why this one")."""

from __future__ import annotations

from typing import Any

KubeObject = dict[str, Any]
"""One object (a Job, a Pod, a Status, a list document) as the API server sent it."""
