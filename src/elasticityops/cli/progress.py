"""Where a long run is, on stderr: a planner run (`eops plan run` over several policies, `eops
plan recommend`'s search) and a batch (`eops invoke NAME --batch FILE`). On a terminal a bar that
counts what is done and shows the time so far; elsewhere (a log, a pipe) a line now and then, so
a log of a run that takes minutes says where it is. stdout keeps only the results."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from elasticityops.cli.units import seconds


class _Bar:
    """A transient bar on a terminal (None elsewhere), started and stopped with the block."""

    def __init__(self, console: Console, label: str, total: int) -> None:
        self.console = console
        self.label = label
        self.started = time.monotonic()
        self.bar: Progress | None = None
        if console.is_terminal:
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self.task = self.bar.add_task(label, total=total)

    def __enter__(self) -> Self:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def so_far(self) -> str:
        return seconds(time.monotonic() - self.started)


class Steps(_Bar):
    """Call it with (settings done, settings in all, the one that starts now) before each
    simulation; `total` may be an upper bound (a search that can stop early)."""

    def __call__(self, done: int, total: int, what: str) -> None:
        if self.bar is not None:
            self.bar.update(
                self.task, completed=done, total=max(total, done), description=f"{self.label} {what}"
            )
            return
        self.console.print(
            f"{self.label} {done + 1}/{total}: {what} ({self.so_far()} so far)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


class Counted(_Bar):
    """Call it with (done, total) as each item ends (`Client.map`'s on_progress): a bar on a
    terminal, else a line at each tenth of the way."""

    def __init__(self, console: Console, label: str, total: int) -> None:
        super().__init__(console, label, total)
        self.said = 0  # tenths said so far, off a terminal

    def __call__(self, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total)
            return
        tenths = done * 10 // max(total, 1)
        if tenths > self.said:
            self.said = tenths
            self.console.print(
                f"{self.label}: {done}/{total} ended ({self.so_far()} so far)", markup=False, highlight=False
            )
