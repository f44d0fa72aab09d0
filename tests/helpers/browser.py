"""Debian's chromium, headless, driven by Playwright: the one helper that starts a browser for
the console's tests and bench. No browser is downloaded (`playwright install` is never run):
Playwright launches /usr/bin/chromium with a fresh profile, and closing the context ends it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


@contextmanager
def chromium(profile: Path) -> Iterator[BrowserContext]:
    """A browser context of a fresh profile in `profile` (made here), 1280x800."""
    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport=VIEWPORT,  # type: ignore[arg-type]
        )
        try:
            yield context
        finally:
            context.close()
