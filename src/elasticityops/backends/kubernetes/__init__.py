"""Kubernetes backend: one GPU Job per invocation, watched to the end (see docs/kubernetes.md)."""
