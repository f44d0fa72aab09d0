"""Capacity planner: replay a trace through a model of GPU node provisioning on a virtual clock.

Layers: `trace` and `synthetic` (traffic in), `model` (the pure discrete-event engine),
`summary` (numbers), `report`/`plots` (files out), `recommend` (search over settings).
"""
