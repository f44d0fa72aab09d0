"""How the CLI reaches the gateway: a client from EOPS_URL / EOPS_TOKEN, and one place that turns
every client error into a short message and an exit code (never a traceback).

Exit codes: 0 done; 1 the server refused or could not be reached, or the invocation did not
succeed; 2 bad input (found here or by the server); 130 interrupted."""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from elasticityops.client import (
    TOKEN_ENV,
    ApiError,
    Client,
    ConnectionFailed,
    InvalidArgument,
    InvalidSpec,
    WaitPolicy,
)
from elasticityops.wire import ProblemOut

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# Server answers that mean "what you sent is wrong", as opposed to "not here" or "not allowed".
_BAD_INPUT_STATUS = frozenset({400, 413, 422})

# Piped output is read by scripts: wide enough that ids and tables are never cut to 80 columns.
out = Console(highlight=False, width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ENV_HELP = "The gateway is found through EOPS_URL (default http://127.0.0.1:8080), the token in EOPS_TOKEN."


def help_of(command: Callable[..., object]) -> str:
    """A client command's help: its docstring, then where it finds the gateway (ENV_HELP)."""
    return f"{inspect.cleandoc(command.__doc__ or '')}\n\n{ENV_HELP}"


def print_json(text: str) -> None:
    """JSON exactly as the API sent it (indented), never wrapped or coloured."""
    sys.stdout.write(json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n")


def fail(message: str, problems: list[ProblemOut] | None = None, code: int = EXIT_FAILED) -> NoReturn:
    """Print `error: message` (and one line per bad field) on stderr and exit with `code`."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    for p in problems or []:
        fix = f"; [dim]{escape(p.fix)}[/]" if p.fix else ""
        err.print(f"  [bold]{escape(p.field)}[/]: {escape(p.problem)}{fix}")
    raise typer.Exit(code)


def bad_input(message: str, problems: list[ProblemOut] | None = None) -> NoReturn:
    fail(message, problems, EXIT_BAD_INPUT)


def _token_hint(exc: ApiError) -> str:
    if os.environ.get(TOKEN_ENV):
        return f"the token in {TOKEN_ENV} was refused ({exc.message})"
    return (
        f"{TOKEN_ENV} is not set: export {TOKEN_ENV}=<the admin token `eops serve` printed> "
        "(or make one with `eops token create`)"
    )


@contextmanager
def connected(wait_policy: WaitPolicy | None = None) -> Iterator[Client]:
    """A client for one command; every way it can fail ends the command with a message."""
    try:
        with Client(wait_policy=wait_policy) as client:
            yield client
    except InvalidSpec as exc:
        bad_input("invalid function spec", exc.problems)
    except InvalidArgument as exc:
        bad_input("bad input", exc.problems)
    except ConnectionFailed as exc:
        fail(exc.message)
    except ApiError as exc:
        if exc.status == 401:
            fail(_token_hint(exc))
        # The per-field lines say it all; the joined message would repeat them.
        message = f"the server refused the request ({exc.code}):" if exc.problems else exc.message
        fail(message, exc.problems, EXIT_BAD_INPUT if exc.status in _BAD_INPUT_STATUS else EXIT_FAILED)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
