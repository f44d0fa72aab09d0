"""Each input of a batch body as the bytes the caller sent: an input is what a single invocation's
body would be, and a job gets its body byte for byte, so a batch's inputs are cut from the body,
not parsed and written out again (which would turn 18446744073709551616 into 1.8446744073709552e+19
and refuse nesting the parser took).

The body has been parsed already (it is valid JSON: an object whose `inputs` is a list); this
only finds where each item of that list begins and ends, by walking the body's strings and
brackets with regular expressions (C speed: no Python loop per byte)."""

from __future__ import annotations

import json
import re

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]')
_SPACE = b" \t\r\n"


def input_bytes(body: bytes, count: int) -> list[bytes] | None:
    """The `count` items of the top-level object's `inputs` list (its last one, as a parser
    keeps a key given twice), each stripped of surrounding whitespace; None if the walk does
    not find exactly that many (then the caller writes them out from the parsed value)."""
    walk = _Walk(body)
    for token in _TOKEN.finditer(body):
        walk.step(token)
    found = walk.found
    if found is None or len(found) != count or not all(found):
        return None
    return found


class _Walk:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.depth = 0
        self.key: str | None = None  # the last string at depth 1, while it may be a key
        self.expecting = False  # after `"inputs":` at depth 1
        self.found: list[bytes] | None = None
        self.current: list[bytes] | None = None  # the items of the `inputs` list being walked
        self.start = 0  # where its item being walked begins

    def step(self, token: re.Match[bytes]) -> None:
        text = token.group()
        if text[:1] == b'"':
            if self.depth == 1 and not self.expecting:
                self.key = _text_of(text)
        elif text == b":":
            self.expecting = self.depth == 1 and self.key == "inputs"
        elif text in (b"[", b"{"):
            self.depth += 1
            if self.expecting and self.depth == 2 and text == b"[":
                self.current, self.start = [], token.end()
            self.expecting = False
        elif text in (b"]", b"}"):
            self._close(token.start())
        else:  # a comma
            self._comma(token)

    def _close(self, at: int) -> None:
        if self.current is not None and self.depth == 2:
            item = self.body[self.start : at].strip(_SPACE)
            if item or self.current:
                self.current.append(item)
            self.found, self.current = self.current, None
        self.depth -= 1

    def _comma(self, token: re.Match[bytes]) -> None:
        if self.current is not None and self.depth == 2:
            self.current.append(self.body[self.start : token.start()].strip(_SPACE))
            self.start = token.end()
        if self.depth == 1:
            self.key, self.expecting = None, False


def _text_of(token: bytes) -> str | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, str) else None
