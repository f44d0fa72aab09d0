"""A batch's inputs cut from its body as sent (api/batch_body.py): each item's bytes, whatever
the spacing, nesting, strings holding brackets and commas, or a key given twice."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from hypothesis import given

from elasticityops.api.batch_body import input_bytes

SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(alphabet='ab",[]{}:\\ é\n')
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@given(st.lists(VALUES, min_size=1, max_size=8), st.sampled_from(["", " ", "\n  "]))
def test_each_item_is_cut_as_sent(values: list[Any], space: str) -> None:
    items = [json.dumps(v, indent=1 if space else None) for v in values]
    listed = (space + "," + space).join(items)
    body = f'{{{space}"inputs"{space}:{space}[{space}{listed}{space}]{space}}}'.encode()
    assert input_bytes(body, len(values)) == [i.encode() for i in items]


def test_big_numbers_and_the_last_of_a_key_given_twice_are_kept_as_sent() -> None:
    body = b'{"inputs": [1], "inputs": [18446744073709551616, 1.10, "a,]"]}'
    assert input_bytes(body, 3) == [b"18446744073709551616", b"1.10", b'"a,]"']


def test_a_count_that_does_not_match_is_none() -> None:
    assert input_bytes(b'{"inputs": [1, 2]}', 3) is None
