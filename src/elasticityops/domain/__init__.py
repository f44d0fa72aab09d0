"""Pure core: function specs, invocations and their state machine, admission decisions.

Nothing here performs I/O or imports a web framework, database or Kubernetes client
(enforced by import-linter, see pyproject.toml).
"""
