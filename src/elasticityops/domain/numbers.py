"""One strict reading of whole numbers, for function specs and request parameters alike.

A number is an int, an integral float, or text in ASCII digits as JSON writes numbers (`60`,
`-3`, `1e9`, `1.5e3`; YAML 1.1 hands `1e9` over as text). Refused, with a message that says
why: booleans (`true` is not 1), full-width or other non-ASCII digits (U+FF15), fractions, and
anything else."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

# ASCII only ([0-9], never \d, which matches every script's digits).
_NUMBER_RE = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?")
_MAX_EXPONENT = 30  # 1e30 is already past every limit; bounds the work of a long exponent


def whole_number(value: object) -> int:
    """`value` as an int, or ValueError naming what it is instead."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is not a number; write a whole number such as 1")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        raise ValueError(f"{value!r} is not a whole number")
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER_RE.fullmatch(text):
            number = Decimal(text)
            exponent = number.adjusted()
            if exponent <= _MAX_EXPONENT and number == number.to_integral_value():
                return int(number)
            if exponent > _MAX_EXPONENT:
                raise ValueError(f"{text} is far too large")
        raise ValueError(f"{value!r} is not a whole number; write it in the digits 0-9, e.g. 60")
    raise ValueError(f"expected a whole number, got {type(value).__name__}")


def _validated(value: object) -> object:
    """`whole_number` for pydantic: its error is an `int_parsing` one, whose fix the error
    tables know ("use a whole number"); None passes through to the field's own type."""
    if value is None:
        return None
    try:
        return whole_number(value)
    except ValueError as exc:
        raise PydanticCustomError("int_parsing", str(exc)) from None


# A whole number field or parameter, read by `whole_number`.
WholeNumber = Annotated[int, BeforeValidator(_validated)]
WholeNumberOrNone = Annotated[int | None, BeforeValidator(_validated)]
