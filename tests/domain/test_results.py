"""The result rule (domain/results.py): strict JSON kept byte for byte, anything else kept as the
JSON string of its text; whatever is stored is served without error and encodes, old rows too."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticityops.domain.results import MAX_DEPTH, as_stored, served, strict_value


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": [1, 2.5, "x", null, true]}',
        b"18446744073709551615",  # the largest unsigned 64-bit integer
        b"-9223372036854775808",  # the smallest signed one
        b'"\\ud83d\\ude00"',  # a surrogate pair: one character
        b"1.5e300",
        b" [1] \n",
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
    ],
)
def test_strict_json_is_kept_as_it_came(raw: bytes) -> None:
    assert as_stored(raw) == raw
    assert served(raw) == json.loads(raw)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"18446744073709551616", "outside 64 bits"),
        (b"-9223372036854775809", "outside 64 bits"),
        (b"[1e400]", "too large for a double"),
        (b'{"x": NaN}', "NaN is not JSON"),
        (b"-Infinity", "-Infinity is not JSON"),
        (b'{"a": 1, "a": 2}', "names a key twice"),
    ],
)
def test_json_readers_take_differently_is_not_strict(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        strict_value(raw)
    assert served(as_stored(raw)) == raw.decode()


@pytest.mark.parametrize(
    "raw",
    [
        b'"\\ud800"',  # a lone surrogate: Python reads it, orjson writes nothing of it
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"[" * 5000 + b"]" * 5000,  # past the interpreter's recursion limit
        b"hello",
        b"caf\xe9",  # not UTF-8
        b"",
    ],
)
def test_anything_else_is_kept_as_its_text(raw: bytes) -> None:
    stored = as_stored(raw)
    assert served(stored) == raw.decode("utf-8", errors="replace")
    assert as_stored(stored) == stored  # the stored form is strict JSON itself
    orjson.dumps(served(stored))


@given(st.binary(max_size=300))
def test_any_bytes_are_stored_as_strict_json_and_served_without_error(raw: bytes) -> None:
    stored = as_stored(raw)
    assert as_stored(stored) == stored
    orjson.dumps(served(stored))


@given(st.binary(max_size=300))
def test_any_row_stored_before_the_rule_is_served_without_error(raw: bytes) -> None:
    orjson.dumps(served(raw))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_what_the_gateway_would_write_is_kept_as_json(value: object) -> None:
    raw = orjson.dumps(value)
    assert as_stored(raw) == raw
    assert served(raw) == orjson.loads(raw)
