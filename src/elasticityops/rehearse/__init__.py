"""`eops rehearse`: replay a planner trace through the real gateway against a real cluster (the
dev cluster by default), one headroom policy after another, measure what happened and set it
beside what the planner predicts for the same trace on the same cluster settings.

Pure parts (no I/O): `cluster_map` (dev cluster knobs -> planner settings), `measure` (numbers
from invocation timelines and node samples), `predict` (the planner on the same trace),
`summary` (summary.json and the differences), `replay` (the arrival scheduler, on an injected
clock and sender). The edges: `gateway` (an `eops serve` subprocess), `cluster` (namespaces and
node samples through the backend's Kubernetes client) and `driver` (one policy after another).
"""
