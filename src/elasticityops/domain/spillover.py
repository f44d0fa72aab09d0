"""Pending-time spillover: when an invocation waiting for a node of one GPU type should move to
the next type its function lists (`gpu.type: [nvidia-tesla-t4, nvidia-l4]`), and why. Pure: the
invocation's notes (what the backend saw: the cluster autoscaler's NotTriggerScaleUp, a stockout
or quota message) and the clock come in, a decision goes out.

Admission spills too (domain.admission: a full budget for the first type); this module covers
what is only learnt once the invocation waits on its type."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from elasticityops.domain.invocations import Invocation, Note, State, add_note

SPILLED = "Spilled"
"""The note kind of a move to another GPU type; the time it was made restarts the wait."""

# Note kinds (backends/kubernetes/observe.py: note_of_event) that say the type cannot be had
# now, however long one waits: the autoscaler will not add a node for the pod, the zone has no
# such machines, the cloud's quota for them is spent.
_GIVE_UP_KINDS = ("Stockout", "NotTriggerScaleUp", "QuotaExceeded")
_ZONE = re.compile(r"\bzone ([a-z]+-[a-z]+[0-9]+-[a-z])\b")


@dataclass(frozen=True)
class Spill:
    to: str  # the GPU type to launch on next
    reason: str  # why the one it waited on cannot be had, for the user

    @property
    def text(self) -> str:
        """The note's text, e.g. `spilled to nvidia-l4: zone us-central1-a stocked out for
        nvidia-tesla-t4`."""
        return f"spilled to {self.to}: {self.reason}"

    def note(self, at: datetime) -> Note:
        return Note(at=at, kind=SPILLED, message=self.text)


def waiting_since(inv: Invocation) -> datetime | None:
    """When it began to wait on its current GPU type: its last spill, else its dispatch."""
    spills = [n.at for n in inv.notes if n.kind == SPILLED]
    return max([*spills, *filter(None, [inv.timeline.dispatched])], default=None)


def next_type(
    inv: Invocation,
    current: str,
    types: Sequence[str],
    now: datetime,
    spill_after_seconds: float,
) -> Spill | None:
    """The type to move a pending invocation to, and why; None to keep waiting.

    `current` is the type it waits on (its gpu_type, or its spec's first type for a row from
    before the gateway kept it); `types` its spec's types in order. It moves only while it has
    no node yet and a type follows `current`; for the first of the notes since it began waiting
    on `current` that says the type cannot be had, or once it has waited `spill_after_seconds`."""
    if inv.state is not State.pending or inv.timeline.capacity_ready is not None:
        return None
    if current not in types or types.index(current) == len(types) - 1:
        return None
    to = types[types.index(current) + 1]
    since = waiting_since(inv)
    if since is None:
        return None
    for note in inv.notes:
        if note.at >= since and note.kind in _GIVE_UP_KINDS:
            return Spill(to, _why(note, current))
    waited = (now - since).total_seconds()
    if waited >= spill_after_seconds:
        return Spill(to, f"no {current} node within {spill_after_seconds:g} s (EOPS_SPILL_AFTER_SECONDS)")
    return None


def _why(note: Note, current: str) -> str:
    if note.kind == "Stockout":
        zone = _ZONE.search(note.message)
        where = f"zone {zone.group(1)}" if zone else "the cloud"
        return f"{where} stocked out for {current}"
    if note.kind == "QuotaExceeded":
        return f"the cloud's quota for {current} is spent ({note.message})"
    return f"the cluster autoscaler will not add a {current} node (NotTriggerScaleUp: {note.message})"


def moved(inv: Invocation, current: str, spill: Spill, at: datetime) -> Invocation | None:
    """`inv` moved to `spill.to`, with the note that says why; None when it is no longer
    pending on `current` (it started, ended or moved meanwhile: nothing to do)."""
    if inv.state is not State.pending or inv.timeline.capacity_ready is not None:
        return None
    if (inv.gpu_type or current) != current:
        return None
    return replace(add_note(inv, spill.note(at)), gpu_type=spill.to)
