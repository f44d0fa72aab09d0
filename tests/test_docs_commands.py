"""Every `eops ...` line of README.md and docs/tour.md runs, in page order, as a reader runs it
(tests/helpers/doc_reader.py says how: the gateway `eops serve` lines start, the ids copied from
one output into the next command, the exit status each line expects): a command that no longer
exists, that now fails where the page shows it working, or whose failure now reads otherwise,
fails here. What is not run is listed below (`KUBERNETES_SECTION`, `NOT_RUN`, `OTHER_PROGRAMS`),
each with its reason, and `test_what_is_not_run` names every eops line they leave out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.doc_commands import DocCommand, commands, parse, program
from helpers.doc_reader import Reader
from helpers.server import REPO

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
    section_block = -1  # the block the Kubernetes section started in, if it has
    for command in commands(REPO / page):
        if command.text.startswith(KUBERNETES_SECTION):
            section_block = command.block
        yield command, why_not_run(command, command.block == section_block)


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
            "eops dev-cluster down && eops dev-cluster up --kueue --baseline 2",
            "eops render kueue --gpu-budget nvidia-tesla-t4=1 --provisioning-class "
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io "
            '| kubectl --kubeconfig "$(eops dev-cluster kubeconfig)" apply -f -',
            'eops serve --backend kubernetes --kubeconfig "$(eops dev-cluster kubeconfig)" --admission kueue',
            "eops invoke sleep --annotation eops.dev/run-seconds=60",
            "eops status inv-...",
        ]
    ), left_out


def _reader(tmp_path: Path) -> Reader:
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    (cwd / "examples").symlink_to(REPO / "examples")
    return Reader(cwd, tmp_path / "eops-data", OTHER_PROGRAMS)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_commands_run(page: str, tmp_path: Path) -> None:
    reader = _reader(tmp_path)
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
        (6, "eops serve --gpus 2 --example", "the gateway", 0),
        (8, "export EOPS_URL=http://127.0.0.1:8080 EOPS_TOKEN=...", "as printed", 0),
        (9, "eops plan trace --out t.csv && eops plan --trace t.csv", "", 0),
        (13, """eops invoke hello --data '{"name": "#1"}'""", "", 0),
        (16, "eops fn deploy bad.yaml", "exit 2: bad input", 2),
    ]
    assert found[2].steps == ["eops plan trace --out t.csv", "eops plan --trace t.csv"]
    assert found[3].output == "inv-01m8mtp1bey8s59ba4t6rteb6r"
    assert [c.runs_eops for c in found] == [True, False, True, True, True]
    assert [c.block for c in found] == [0, 0, 0, 1, 1]


def test_a_failure_shown_without_its_exit_status_is_refused() -> None:
    with pytest.raises(ValueError, match="say its exit status"):
        parse("```console\n$ eops fn deploy bad.yaml\nerror: invalid function spec\n```\n", "page.md")


def test_a_capture_runs_the_command_inside() -> None:
    assert program("""ID=$(eops invoke sleep --data '{"seconds": 600}')""") == "eops"
    assert program("EOPS_TOKEN= .venv/bin/eops fn ls") == ".venv/bin/eops"


STALE = """
```console
$ eops serve --gpus 1 --example
$ eops invoke hello --data '{"name": "Ada"}'
inv-01m8mtp1bey8s59ba4t6rteb6r

$ eops fn show hello
```
"""


@pytest.mark.slow
def test_a_page_naming_a_command_the_cli_lacks_fails(tmp_path: Path) -> None:
    """The reader itself, on a page as the issue found docs/functions.md (`fn show`; it is
    `fn get`): the page fails at that line, after the lines before it ran."""
    reader = _reader(tmp_path)
    *before, stale = parse(STALE, "page.md")
    try:
        for command in before:
            reader.run(command)
        with pytest.raises(AssertionError, match=r"page.md:7: `eops fn show hello` exited 2"):
            reader.run(stale)
    finally:
        reader.stop()
    assert reader.copied["inv-01m8mtp1bey8s59ba4t6rteb6r"] == reader.last["invocation id"]
