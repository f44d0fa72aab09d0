"""An attempt's output kept by the gateway (MultiKueue: the worker's copy of the Job, its pod
with it, is deleted as soon as the work ends, so the gateway keeps the pod's log before it lets
the pod go). Only its last bytes are kept: what a failure prints last is what is looked for."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class KeptLog:
    invocation_id: str
    attempt: int
    cluster: str  # the MultiKueue worker whose pod wrote it
    data: bytes  # the last `limit` bytes of the pod's log
    dropped: bool  # the log was longer: its beginning is not kept
    kept_at: datetime

    def shown(self) -> bytes:
        """What a read of the logs answers: the bytes kept, after a line saying that the
        beginning is not there where it is not."""
        if not self.dropped:
            return self.data
        head = f"[eops: the log was longer; its last {len(self.data)} bytes were kept]\n"
        return head.encode() + self.data


class LastBytes:
    """The last `limit` bytes of a stream read in chunks, in no more than twice that memory
    however long the stream, and whether any came before them."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) > 2 * self._limit:
            self._trim()

    def value(self) -> bytes:
        """What is kept: with its beginning dropped, from its first whole line on (the cut may
        fall inside a line, or inside a character)."""
        self._trim()
        data = bytes(self._buffer)
        if self.dropped:
            start = data.find(b"\n") + 1
            if 0 < start < len(data):
                data = data[start:]
        return data

    def _trim(self) -> None:
        over = len(self._buffer) - self._limit
        if over > 0:
            del self._buffer[:over]
            self.dropped = True
