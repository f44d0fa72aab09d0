"""A reader going through a page's commands (tests/helpers/doc_commands.py finds them) as
written, in order: what tests/test_docs_commands.py runs for README.md and docs/tour.md.

- **Where.** A working directory of its own, with `examples/` linked to the checkout's (so
  files the pages make, `t.csv`, `plan/`, `bad.yaml`, stay out of the checkout), and a data dir of
  its own as `EOPS_DATA_DIR` for every command: it stands for the reader's `~/.eops`.
- **`eops serve ...`** as written, on the local backend, with `--host 127.0.0.1 --port 0
  --data-dir DIR` added (tests/helpers/server.py): it runs in the background as the page's
  gateway; a later `serve` line stops it first, as a reader presses Ctrl-C in its terminal. Its
  printed URL and admin token are `EOPS_URL` and `EOPS_TOKEN` from then on, as both pages say to
  set them ("as printed"); an `export EOPS_URL=... EOPS_TOKEN=...` line sets those same values.
- **`eops` or `.venv/bin/eops`**: this virtualenv's `eops`: `eops` (the command on PATH) its entry
  point run in this pytest (tests/helpers/eops_in_process.py: the same environment, working
  directory and streams, without a new interpreter's second of start-up each), `.venv/bin/eops`
  (a path to the script) a process of that file, as the page names it. `A && B` runs A, then B.
  `VAR=value eops ...` sets VAR for that command; `NAME=$(eops ...)` keeps its stdout as `$NAME`.
- **Values copied from an output** (`inv-...`, `tok-...` ids, `eops_...` tokens, the data dir
  `eops serve` names): where a console block shows the output with such a value, the value this
  run printed in the same place (the n-th distinct one of its kind) stands for it in every later
  command; a value shown again later must be printed again in the same place. A README
  placeholder `inv-...` or `tok-...` is the id of that kind in the latest output that named
  exactly one (what `eops invoke` or `eops token create` printed), as a reader copies it: not
  from a listing of several.
- **Exit status**: 0, or what the line's comment says (`# exit 2: why`). A failure's message has
  no ids or times in it, so one shown in a console block must be what the command prints.
- **`$ cat FILE`** with its contents shown: the test writes FILE with them (the reader makes it).
- A program other than eops is not run; the reader is told why (`not_run`).
"""

from __future__ import annotations

import difflib
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from helpers.doc_commands import ASSIGNMENT, CAPTURE, DocCommand, is_eops, split_outside_quotes
from helpers.eops_in_process import run_eops
from helpers.server import EOPS, RunningServer, base_env, start_server

COMMAND_TIMEOUT = 60.0
# What a reader copies from an output into a later command.
COPIED = {
    "invocation id": re.compile(r"\binv-[0-9a-z]{26}\b"),
    "token id": re.compile(r"\btok-[0-9a-f]{12}\b"),
    "token": re.compile(r"\beops_[A-Za-z0-9_-]{43}"),
    "data dir": re.compile(r"(?<=data in )/[^\s)]+"),
}
PLACEHOLDERS = {"inv-...": "invocation id", "tok-...": "token id"}
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclass
class Reader:
    """One reader going through one page: the gateway it started, what it exported, the values
    it copied."""

    cwd: Path
    data_dir: Path
    not_run: Mapping[str, str]  # program -> why the reader does not run it
    env: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    copied: dict[str, str] = field(default_factory=dict)  # the page's value -> this run's
    last: dict[str, str] = field(default_factory=dict)  # kind -> the latest output's only one
    gateway: RunningServer | None = None
    transcript: list[str] = field(default_factory=list)

    def run(self, command: DocCommand) -> None:
        text = self._substituted(command)
        steps = split_outside_quotes(text, "&&")
        outputs: list[str] = []
        for index, step in enumerate(steps):
            expected = command.expected_exit if index == len(steps) - 1 else 0
            outputs.append(self._step(command, step, expected))
        self._learn(command, "".join(outputs))
        if command.expected_exit and command.output:
            _same_lines(command, "".join(outputs))

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
            self.gateway = None

    def _step(self, command: DocCommand, step: str, expected: int) -> str:
        capture = CAPTURE.match(step)
        words = shlex.split(capture.group(2) if capture else step)
        if words and words[0] == "export":
            self._export(command, words[1:])
            return ""
        prefix: dict[str, str] = {}
        while words and ASSIGNMENT.match(words[0]):
            name, value = words.pop(0).split("=", 1)
            prefix[name] = value
        if words[0] == "cat":
            (self.cwd / words[1]).write_text(command.output + "\n")
            return ""
        if not is_eops(words[0]):
            self.transcript.append(f"not run: {step}   ({command.where}: {self.not_run[words[0]]})")
            return ""
        if words[1:2] == ["serve"]:
            return self._serve(step, words[2:], prefix)
        started = time.monotonic()
        env = {**base_env(), "EOPS_DATA_DIR": str(self.data_dir), **self.env, **prefix}
        if words[0] == "eops":
            code, stdout, stderr = run_eops(words[1:], env, self.cwd)
        else:
            done = subprocess.run(
                [EOPS, *words[1:]],
                capture_output=True,
                text=True,
                env=env,
                cwd=self.cwd,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        output = stdout + stderr
        took = time.monotonic() - started
        self.transcript.append(f"$ {step}   ({command.where}, exit {code}, {took:.1f}s)\n{output}")
        assert code == expected, (
            f"{command.where}: `{command.text}` exited {code}, the page expects {expected}:\n{output}"
        )
        if capture:
            self.variables[capture.group(1)] = stdout.strip()
        return output

    def _serve(self, step: str, args: list[str], prefix: dict[str, str]) -> str:
        self.stop()
        self.gateway = start_server(self.data_dir, *args, env=prefix, cwd=self.cwd)
        self.env.update(EOPS_URL=self.gateway.url, EOPS_TOKEN=self.gateway.token)
        self.transcript.append(f"$ {step}   (in the background)\n{self.gateway.output()}")
        return self.gateway.output()

    def _export(self, command: DocCommand, assignments: list[str]) -> None:
        for assignment in assignments:
            name, value = assignment.split("=", 1)
            if name in ("EOPS_URL", "EOPS_TOKEN"):
                assert self.gateway is not None, f"{command.where}: {name} exported before `eops serve`"
                value = self.gateway.url if name == "EOPS_URL" else self.gateway.token
            self.env[name] = value

    def _substituted(self, command: DocCommand) -> str:
        text = command.text
        for shown, real in self.copied.items():
            text = text.replace(shown, real)
        for kind, pattern in COPIED.items():
            for value in pattern.findall(text):
                assert value in self.copied.values(), (
                    f"{command.where}: `{command.text}` uses the {kind} {value}, which no earlier "
                    "command's shown output printed"
                )
        for placeholder, kind in PLACEHOLDERS.items():
            if placeholder in text:
                assert kind in self.last, f"{command.where}: `{placeholder}` but no {kind} printed before"
                text = text.replace(placeholder, self.last[kind])

        def variable(found: re.Match[str]) -> str:
            name = found.group(1)
            assert name in self.variables, f"{command.where}: ${name} is not set by an earlier command"
            return self.variables[name]

        return _VARIABLE.sub(variable, text)

    def _learn(self, command: DocCommand, output: str) -> None:
        for kind, pattern in COPIED.items():
            printed = _distinct(pattern.findall(output))
            if len(printed) == 1:
                self.last[kind] = printed[0]
            for place, shown in enumerate(_distinct(pattern.findall(command.output))):
                assert place < len(printed), (
                    f"{command.where}: the page shows `{command.text}` printing the {kind} {shown}; "
                    f"this run printed {len(printed)} of them:\n{output}"
                )
                known = self.copied.setdefault(shown, printed[place])
                assert known == printed[place], (
                    f"{command.where}: the page shows `{command.text}` printing {shown} "
                    f"as its {kind} #{place + 1} (here {known}); this run printed {printed[place]}:\n{output}"
                )


def _same_lines(command: DocCommand, output: str) -> None:
    """A failure's message has no ids or times in it: the page shows it as it is printed."""
    shown, printed = _lines(command.output), _lines(output)
    diff = "\n".join(difflib.unified_diff(shown, printed, "the page", "this run", lineterm=""))
    assert shown == printed, f"{command.where}: `{command.text}` prints something else:\n{diff}"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def _distinct(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))
