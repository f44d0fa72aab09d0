"""The shell commands a Markdown page shows, in page order: what `tests/test_docs_commands.py`
runs.

Two kinds of fenced block hold commands:

- ```` ```bash ```` (or `sh`, `shell`): every line is a command; a line ending in `\\` goes on
  on the next one; `# ...` after a command is its comment; blank and comment-only lines are not
  commands;
- ```` ```console ````: a line starting `$ ` is a command, the lines after it (up to the next
  `$ ` line) are the output the page shows for it.

A command's comment may say the exit status the page expects, as `# exit N: why`; without one
it is 0. A console command whose shown output starts `error:` must say its status that way (a
page showing an error and a test expecting success cannot both be right)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_SHELL_BLOCKS = {"bash", "sh", "shell"}
_EXIT = re.compile(r"^exit (\d+)\b")
_EOPS = re.compile(r"^(?:\S+/)?eops$")
CAPTURE = re.compile(r"^(\w+)=\$\((.*)\)$")  # NAME=$(command)
ASSIGNMENT = re.compile(r"^(\w+)=(.*)$", re.DOTALL)  # VAR=value before a command


@dataclass(frozen=True)
class DocCommand:
    """One command line of a page: `text` with its comment (`comment`) taken off."""

    doc: str
    line: int  # 1-based, where the command starts
    text: str
    comment: str = ""
    output: str = ""  # what a console block shows it print; "" in a bash block
    block: int = 0  # which fenced block of the page (0: the first)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def expected_exit(self) -> int:
        found = _EXIT.match(self.comment)
        return int(found.group(1)) if found else 0

    @property
    def steps(self) -> list[str]:
        """The `&&`-joined commands of the line, in order."""
        return split_outside_quotes(self.text, "&&")

    @property
    def runs_eops(self) -> bool:
        return any(is_eops(program(step)) for step in self.steps)


def is_eops(word: str) -> bool:
    """`eops`, or a path to it such as `.venv/bin/eops`."""
    return _EOPS.match(word) is not None


def program_words(step: str) -> list[str]:
    """The words of one command: of the inner one in `NAME=$(...)`, without `VAR=value` before it."""
    capture = CAPTURE.match(step)
    words = shlex.split(capture.group(2) if capture else step)
    while words and ASSIGNMENT.match(words[0]):
        words.pop(0)
    return words


def program(step: str) -> str:
    words = program_words(step)
    return words[0] if words else ""


def commands(path: Path) -> list[DocCommand]:
    """Every command of the page at `path`, in page order."""
    return parse(path.read_text(), path.name)


def parse(markdown: str, doc: str) -> list[DocCommand]:
    found: list[DocCommand] = []
    lines = markdown.splitlines()
    kind: str | None = None  # the language of the fenced block we are in
    body: list[tuple[int, str]] = []
    blocks = 0
    for number, line in enumerate(lines, start=1):
        fence = _FENCE.match(line)
        if fence is None:
            if kind is not None:
                body.append((number, line))
            continue
        if kind is None:
            kind, body = fence.group(1), []
            continue
        if kind in _SHELL_BLOCKS:
            found.extend(_bash_block(body, doc, blocks))
        elif kind == "console":
            found.extend(_console_block(body, doc, blocks))
        kind = None
        blocks += 1
    return found


def _bash_block(body: list[tuple[int, str]], doc: str, block: int) -> list[DocCommand]:
    out: list[DocCommand] = []
    pending: list[str] = []
    start = 0
    for number, line in body:
        if not pending:
            start = number
        # A continuation joins as the shell joins it: one space between the pieces, whatever
        # the indentation of the next line.
        piece = line.strip() if pending else line.rstrip()
        if piece.endswith("\\"):
            pending.append(piece[:-1].rstrip())
            continue
        text, comment = strip_comment(" ".join([*pending, piece]))
        pending = []
        if text:
            out.append(DocCommand(doc, start, text, comment, block=block))
    return out


def _console_block(body: list[tuple[int, str]], doc: str, block: int) -> list[DocCommand]:
    out: list[DocCommand] = []
    current: tuple[int, str, str] | None = None  # line, text, comment
    shown: list[str] = []

    def close() -> None:
        if current is not None:
            line, text, comment = current
            out.append(DocCommand(doc, line, text, comment, "\n".join(shown).strip("\n"), block))

    for number, line in body:
        if line.startswith("$ "):
            close()
            text, comment = strip_comment(line[2:])
            current, shown = (number, text, comment), []
        else:
            shown.append(line)
    close()
    for command in out:
        if command.output.startswith("error:") and _EXIT.match(command.comment) is None:
            raise ValueError(
                f"{command.where}: `{command.text}` is shown failing; say its exit status "
                "in a comment after it, `# exit N: why`"
            )
    return out


def strip_comment(line: str) -> tuple[str, str]:
    """(command, comment) of one shell line: `#` starts a comment at the start of a word, outside
    quotes."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip(), line[index + 1 :].strip()
    return line.strip(), ""


def split_outside_quotes(text: str, separator: str) -> list[str]:
    """`text` cut at each `separator` that is outside quotes and `$(...)`, each piece stripped."""
    pieces: list[str] = []
    quote = ""
    depth = 0
    start = index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif text.startswith("$(", index):
            depth += 1
            index += 1
        elif char == ")" and depth:
            depth -= 1
        elif depth == 0 and text.startswith(separator, index):
            pieces.append(text[start:index].strip())
            start = index + len(separator)
            index = start
            continue
        index += 1
    pieces.append(text[start:].strip())
    return [piece for piece in pieces if piece]
