"""The real traces beside the project (`../shared/traces/`, README there), read in place and
never copied in. From a git worktree the sibling `shared/` is the main checkout's; EOPS_TRACES
names another folder (as the benchmarks read it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAW_GENTD26 = "alibaba_gentd26_lora_request_trace.csv"
SCALED_GENTD26 = "gentd26_2024-12-02T12_2d_scaled100.csv"


def _checkouts(root: Path) -> list[Path]:
    """This checkout, and the main one where this is a worktree (`.git` is then a file naming
    `<main>/.git/worktrees/<name>`)."""
    out = [root]
    marker = root / ".git"
    if marker.is_file():
        text = marker.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            out.append(Path(text.removeprefix("gitdir:").strip()).parent.parent.parent)
    return out


def shared_trace(name: str) -> Path:
    """The path of a shared trace; skips the test where the shared folder is not there."""
    given = os.environ.get("EOPS_TRACES")
    folders = [Path(given)] if given else [c.parent / "shared" / "traces" for c in _checkouts(ROOT)]
    for folder in folders:
        path = folder / name
        if path.is_file():
            return path
    pytest.skip(f"../shared/traces/{name} is not beside this checkout")
