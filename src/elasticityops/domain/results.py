"""A job's result as it is stored and as it is served: one rule, applied where a result comes in
(the job's callback, the local backend's result file, a pod's termination message).

JSON that every reader takes as written is kept exactly as it came. Anything else is kept as the
JSON string of its text (bytes that are not UTF-8 replaced with U+FFFD): plain text, as always,
and JSON that one parser takes and another refuses or changes: a lone surrogate (`"\\ud800"`),
NaN or an infinity (`1e400`), an integer outside 64 bits, an object naming a key twice,
nesting deeper than `MAX_DEPTH`. So a stored result is always strict JSON that the gateway's
encoder writes back unchanged, and no read of it can fail; the caller sees an odd result as the
text the job wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

MAX_DEPTH = 254
"""Arrays and objects within one another: orjson, the gateway's encoder, writes no deeper."""

_INT_RANGE = range(-(2**63), 2**64)  # what orjson reads and writes as an integer


class _NotStrict(ValueError):
    pass


def _int(text: str) -> int:
    value = int(text)
    if value not in _INT_RANGE:
        raise _NotStrict(f"integer {text[:20]}... is outside 64 bits")
    return value


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotStrict(f"number {text[:20]} is too large for a double")
    return value


def _constant(name: str) -> Any:
    raise _NotStrict(f"{name} is not JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _NotStrict("an object names a key twice (readers differ on which one counts)")
    return value


def strict_value(raw: bytes) -> Any:
    """The JSON value of `raw` when every reader takes it as written; raises ValueError (or
    RecursionError for nesting past the interpreter's limit) otherwise."""
    value = json.loads(
        raw, parse_int=_int, parse_float=_float, parse_constant=_constant, object_pairs_hook=_object
    )
    # Lone surrogates, and nesting past MAX_DEPTH: the encoder refuses them.
    orjson.dumps(value)
    return value


def as_stored(raw: bytes) -> bytes:
    """What is stored for a result that came in as `raw`: `raw` itself where it is strict JSON,
    else the JSON string of its text."""
    try:
        strict_value(raw)
    except (ValueError, RecursionError, TypeError, orjson.JSONEncodeError):
        return orjson.dumps(raw.decode("utf-8", errors="replace"))
    return raw


def served(stored: bytes | None) -> Any:
    """The value a stored result is served as. Never raises: a row stored before the rule (raw
    text, or JSON that does not encode) is served as its text."""
    if stored is None:
        return None
    try:
        value = orjson.loads(stored)
        orjson.dumps(value)  # nesting past MAX_DEPTH reads but does not write
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return stored.decode("utf-8", errors="replace")
    return value


PREVIEW_CHARS = 200
"""How much of a result a list shows: lists carry a summary, the invocation itself the result."""


@dataclass(frozen=True)
class ResultSummary:
    bytes: int  # the stored result's size
    preview: str  # its first PREVIEW_CHARS characters, as stored (JSON text)


PREVIEW_BYTES = 4 * PREVIEW_CHARS
"""The head of a stored result a preview is made from: never more than 4 bytes a character, so
this many always hold PREVIEW_CHARS of it. A list reads only this much of each result (and its
size) from the store."""


def summary(stored: bytes | None) -> ResultSummary | None:
    """What a list says of a result: its size and the start of its JSON text."""
    if stored is None:
        return None
    return summary_of(len(stored), stored[:PREVIEW_BYTES])


def summary_of(size: int, head: bytes) -> ResultSummary:
    """The summary of a stored result of `size` bytes that starts with `head` (its first
    PREVIEW_BYTES, or all of it)."""
    return ResultSummary(size, head[:PREVIEW_BYTES].decode("utf-8", errors="replace")[:PREVIEW_CHARS])
