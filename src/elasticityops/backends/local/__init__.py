"""The local backend: each invocation is a real process on this machine with a GPU slot of its own.

Deliberately free of imports: the per-job supervisor (`python -m
elasticityops.backends.local.supervisor`) starts through this package and must start fast.
Import `LocalBackend` from `elasticityops.backends.local.backend`."""
