"""A tmpfs of the test's own, for a disk that fills up: mounted on a folder under the test's
``tmp_path`` (never a shared one), and only where the tests run as root (the test is skipped
otherwise, saying why)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (mount's ``size=``: ``1m``, ``8m``) on the new folder
    ``mount``; yields it, and unmounts it after (for a fixture: ``yield from``)."""
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
