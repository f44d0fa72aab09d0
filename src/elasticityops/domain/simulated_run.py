"""The two annotations the dev cluster's kwok stages read to play a pod (devcluster/stages.py):
how long it runs once Running and how it ends. A function may set them for all its invocations
and an invocation for itself; both are checked here, so that a typo is refused where it is made
rather than making the simulated pod run for ever or fail far from the request that caused it."""

from __future__ import annotations

import re

RUN_SECONDS = "eops.dev/run-seconds"  # decimal seconds the simulated pod runs once Running
EXIT_CODE = "eops.dev/exit-code"  # the simulated containers' exit code

_SECONDS_RE = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,6})?$")
_EXIT_CODE_RE = re.compile(r"^[0-9]{1,3}$")


def value_problem(key: str, value: str) -> tuple[str, str] | None:
    """(what is wrong, the fix) for a value of RUN_SECONDS or EXIT_CODE; None for any other key
    or a good value."""
    if key == RUN_SECONDS and not _SECONDS_RE.match(value):
        return (
            f"{RUN_SECONDS}={quoted(value)} is not a number of seconds",
            'use a decimal number of seconds such as "12" or "2.5"',
        )
    if key == EXIT_CODE and not (_EXIT_CODE_RE.match(value) and int(value) <= 255):
        return f"{EXIT_CODE}={quoted(value)} is not an exit code", "use a whole number from 0 to 255"
    return None


def quoted(text: str, most: int = 80) -> str:
    """`text` quoted for a message, cut short: the message must stay readable whatever came in."""
    return repr(text if len(text) <= most else text[:most] + "...")
