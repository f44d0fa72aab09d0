"""The store's records of the GPU node watch's nodes (domain/node_history.py) as the watch
holds them: those read at its start and not yet matched with a listed node, and what was last
written of each node, so that a record is written only when a fact the attribution uses
changed (a node's status updates, every few seconds, write nothing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from elasticityops.domain.node_history import NodeHistory, NodeHistoryWrite


class NodeRecords:
    def __init__(self) -> None:
        self.keeping = False  # False: no store to keep them in (or it could not be read)
        self._written: dict[str, NodeHistory] = {}
        self._unmatched: dict[str, NodeHistory] = {}
        self._touched: set[str] = set()

    def restore(self, records: Iterable[NodeHistory]) -> None:
        """Start from these (the store's, read as the watch starts): they are what is written."""
        self.keeping = True
        self._written = {r.name: r for r in records}
        self._unmatched = dict(self._written)
        self._touched.clear()

    def claim(self, name: str) -> NodeHistory | None:
        """The record read at the start for a node its first list holds, once."""
        return self._unmatched.pop(name, None)

    def unclaimed(self) -> list[NodeHistory]:
        """The records no listed node claimed, once: nodes that went while no gateway watched."""
        left, self._unmatched = list(self._unmatched.values()), {}
        return left

    def touch(self, name: str) -> None:
        """The node's facts may have changed: compare them at the next `writes`."""
        self._touched.add(name)

    def writes(self, current: Callable[[str], NodeHistory | None]) -> list[NodeHistoryWrite]:
        """The records of the touched nodes that differ from what was written (`current`: the
        node's record now, None for a node gone), taken as written."""
        touched, self._touched = sorted(self._touched), set()
        if not self.keeping:
            return []
        out = []
        for name in touched:
            now = current(name)
            if now == self._written.get(name):
                continue
            out.append(NodeHistoryWrite(name, now))
            if now is None:
                del self._written[name]
            else:
                self._written[name] = now
        return out
