"""Every `eops ...` line of README.md and docs/tour.md runs, in page order, as a reader runs it:
a command that no longer exists, or that now fails where the page shows it working, fails here.

How the test reads a page (tests/helpers/doc_commands.py finds its commands):

- **Where.** A working directory of its own, with `examples/` linked to the checkout's (so
  files the pages make, `t.csv`, `plan/`, `bad.yaml`, stay out of the checkout), and a data dir of
  its own as `EOPS_DATA_DIR` for every command: it stands for the reader's `~/.eops`.
- **`eops serve ...`** as written, on the local backend, with `--host 127.0.0.1 --port 0
  --data-dir DIR` added (tests/helpers/server.py): it runs in the background as the page's
  gateway; a later `serve` line stops it first, as a reader presses Ctrl-C in its terminal. Its
  printed URL and admin token are `EOPS_URL` and `EOPS_TOKEN` from then on, as both pages say to
  set them ("as printed"); an `export EOPS_URL=... EOPS_TOKEN=...` line sets those same values.
- **`eops` or `.venv/bin/eops`**: this virtualenv's `eops`. `A && B` runs A, then B.
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
- **Not run, each with its reason**: `NOT_RUN`, `KUBERNETES_SECTION` and `OTHER_PROGRAMS`
  below; `test_what_is_not_run` lists every line they leave out.
"""

from __future__ import annotations

import difflib
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers.doc_commands import ASSIGNMENT, CAPTURE, DocCommand, commands, is_eops, parse, program
from helpers.server import EOPS, REPO, RunningServer, base_env, start_server

PAGES = ("README.md", "docs/tour.md")

# The line that starts the Kubernetes part of the README's quick tour: it and every later line
# of its block need the dev cluster (a real control plane built from Go modules, minutes to
# start); the cluster tests (`-m cluster`) run those commands there.
KUBERNETES_SECTION = "eops dev-cluster up"
# Lines not run (matched by how they start), and why.
NOT_RUN = {
    "eops rehearse ": "replays the trace on the dev cluster; tests/rehearse/test_rehearse_cluster.py runs it",
}
# Programs other than eops on the pages' command lines, and why the test does not run them.
OTHER_PROGRAMS = {
    "python3": "makes the virtualenv (`python3 -m venv .venv`) this suite already runs in",
    ".venv/bin/pip": "installs the checkout into that virtualenv, as the suite's set-up did",
    "bash": "`bash scripts/test` is this suite",
    "python": "the Python client's demo script; tests/client run the client",
}
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


def why_not_run(command: DocCommand, in_kubernetes_section: bool) -> str | None:
    """The reason a command is not run, or None if it is."""
    if in_kubernetes_section:
        return "needs the dev cluster (the Kubernetes part of the quick tour)"
    for start, reason in NOT_RUN.items():
        if command.text.startswith(start):
            return reason
    programs = {program(step) for step in command.steps}
    if command.runs_eops or programs == {"export"} or (programs == {"cat"} and command.output):
        return None  # `cat FILE` shown with its contents: the reader makes FILE
    unknown = programs - OTHER_PROGRAMS.keys()
    if unknown:
        raise AssertionError(f"{command.where}: `{command.text}`: run it or add it to OTHER_PROGRAMS")
    return "; ".join(OTHER_PROGRAMS[p] for p in sorted(programs))


def page_commands(page: str) -> Iterator[tuple[DocCommand, str | None]]:
    """Each command of `page` with the reason it is not run (None: it is run)."""
    in_section = False
    block_end = -1
    for command in commands(REPO / page):
        if in_section and command.line > block_end:
            in_section = False
        if command.text.startswith(KUBERNETES_SECTION):
            in_section = True
            block_end = _block_end(REPO / page, command.line)
        yield command, why_not_run(command, in_section)


def _block_end(path: Path, line: int) -> int:
    lines = path.read_text().splitlines()
    for number in range(line, len(lines) + 1):
        if lines[number - 1].startswith("```"):
            return number
    return len(lines)


@dataclass
class Reader:
    """One reader going through one page: the gateway it started, what it exported, the values
    it copied."""

    cwd: Path
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    copied: dict[str, str] = field(default_factory=dict)  # the page's value -> this run's
    last: dict[str, str] = field(default_factory=dict)  # kind -> the latest output's only one
    gateway: RunningServer | None = None
    transcript: list[str] = field(default_factory=list)

    def run(self, command: DocCommand) -> None:
        text = self._substituted(command)
        steps = command.steps if text == command.text else DocCommand("", 0, text).steps
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
            self.transcript.append(f"not run: {step}   ({command.where}: {OTHER_PROGRAMS[words[0]]})")
            return ""
        if words[1:2] == ["serve"]:
            return self._serve(step, words[2:], prefix)
        started = time.monotonic()
        done = subprocess.run(
            [EOPS, *words[1:]],
            capture_output=True,
            text=True,
            env={**base_env(), "EOPS_DATA_DIR": str(self.data_dir), **self.env, **prefix},
            cwd=self.cwd,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        output = done.stdout + done.stderr
        took = time.monotonic() - started
        self.transcript.append(f"$ {step}   ({command.where}, exit {done.returncode}, {took:.1f}s)\n{output}")
        assert done.returncode == expected, (
            f"{command.where}: `{command.text}` exited {done.returncode}, the page expects {expected}:\n"
            f"{output}"
        )
        if capture:
            self.variables[capture.group(1)] = done.stdout.strip()
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


def test_what_is_not_run() -> None:
    """The lines left out, by page: a new line that needs the dev cluster shows up here."""
    left_out = {
        (command.doc, command.text): reason
        for page in PAGES
        for command, reason in page_commands(page)
        if reason is not None and command.runs_eops
    }
    assert sorted(text for _, text in left_out) == sorted(
        [
            "eops rehearse --trace short.csv --out rehearsal/ --headroom none",
            "eops dev-cluster up --baseline 2",
            'eops serve --backend kubernetes --kubeconfig "$(eops dev-cluster kubeconfig)"',
            "eops fn deploy examples/sleep.yaml",
            "eops invoke sleep --annotation eops.dev/run-seconds=90",
            "eops logs inv-... -f",
            'eops doctor --kubeconfig "$(eops dev-cluster kubeconfig)"',
        ]
    ), left_out


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_commands_run(page: str, tmp_path: Path) -> None:
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    (cwd / "examples").symlink_to(REPO / "examples")
    reader = Reader(cwd, tmp_path / "eops-data")
    ran = 0
    try:
        for command, reason in page_commands(page):
            if reason is None:
                reader.run(command)
                ran += command.runs_eops
            else:
                reader.transcript.append(f"not run: {command.text}   ({command.where}: {reason})")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- transcript ---\n" + "\n".join(entry[-2000:] for entry in reader.transcript[-4:])
        ) from None
    finally:
        reader.stop()
        # What ran, and how long each took (shown with -rP, and on failure).
        print("\n".join(entry.splitlines()[0] for entry in reader.transcript))
    assert ran >= 15, f"only {ran} eops lines of {page} ran"


PAGE = """
Intro.

```bash
# a comment line
eops serve --gpus 2 \\
  --example          # the gateway
export EOPS_URL=http://127.0.0.1:8080 EOPS_TOKEN=...   # as printed
eops plan trace --out t.csv && eops plan --trace t.csv
```

```console
$ eops invoke hello --data '{"name": "#1"}'
inv-01m8mtp1bey8s59ba4t6rteb6r

$ eops fn deploy bad.yaml       # exit 2: bad input
error: invalid function spec
```

```python
eops = Client()
```
"""


def test_the_commands_of_a_page() -> None:
    found = parse(PAGE, "page.md")
    assert [(c.line, c.text, c.comment, c.expected_exit) for c in found] == [
        (6, "eops serve --gpus 2    --example", "the gateway", 0),
        (8, "export EOPS_URL=http://127.0.0.1:8080 EOPS_TOKEN=...", "as printed", 0),
        (9, "eops plan trace --out t.csv && eops plan --trace t.csv", "", 0),
        (13, """eops invoke hello --data '{"name": "#1"}'""", "", 0),
        (16, "eops fn deploy bad.yaml", "exit 2: bad input", 2),
    ]
    assert found[2].steps == ["eops plan trace --out t.csv", "eops plan --trace t.csv"]
    assert found[3].output == "inv-01m8mtp1bey8s59ba4t6rteb6r"
    assert [c.runs_eops for c in found] == [True, False, True, True, True]


def test_a_failure_shown_without_its_exit_status_is_refused() -> None:
    with pytest.raises(ValueError, match="say its exit status"):
        parse("```console\n$ eops fn deploy bad.yaml\nerror: invalid function spec\n```\n", "page.md")


def test_a_capture_runs_the_command_inside() -> None:
    assert program("""ID=$(eops invoke sleep --data '{"seconds": 600}')""") == "eops"
    assert program("EOPS_TOKEN= .venv/bin/eops fn ls") == ".venv/bin/eops"
