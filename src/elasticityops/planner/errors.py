"""The planner's one error type for bad input (trace rows, flags, config keys)."""

from __future__ import annotations


class PlannerInputError(ValueError):
    """Input the planner refuses; the message names the row, flag or key. The CLI prints it on one
    line and exits with code 2."""
