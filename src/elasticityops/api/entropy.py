"""Random bytes for invocation ids, from os.urandom in blocks.

One getrandom() call per id releases and re-takes the GIL on every accept; while the store's
writer thread holds it, the event loop waits up to a switch interval each time (seen in
profiles of bench/gateway_accept.py as a third of the accept path). Drawing 4 KiB at once keeps
the same source and quality with one system call per few hundred ids."""

from __future__ import annotations

import os

_BLOCK = 4096


class BufferedEntropy:
    def __init__(self, block: int = _BLOCK) -> None:
        self._block = block
        self._buffer = b""
        self._offset = 0

    def __call__(self, n: int) -> bytes:
        if self._offset + n > len(self._buffer):
            self._buffer = os.urandom(max(self._block, n))
            self._offset = 0
        chunk = self._buffer[self._offset : self._offset + n]
        self._offset += n
        return chunk
