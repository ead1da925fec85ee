"""Debian's Chromium, as the screens' tests, the manual's test and the web benchmarks launch
it: by ``executable_path``, never a browser Playwright downloads."""

from __future__ import annotations

import os

from playwright.async_api import Browser, Playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAUNCH_WITHIN_MS = 120_000
"""A bound on a failure only (Playwright's default is 30 s; a loaded machine took longer)."""


class ChromiumMissing(RuntimeError):
    """Debian's chromium package is not installed."""


async def launch(playwright: Playwright) -> Browser:
    """Headless Chromium with a fresh profile (Playwright gives every launch a new temporary
    user data folder); ``ChromiumMissing`` saying what installs it."""
    if not os.access(CHROMIUM, os.X_OK):
        raise ChromiumMissing(
            f"{CHROMIUM} is missing: make setup installs Debian's chromium package"
        )
    return await playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=LAUNCH_WITHIN_MS
    )
