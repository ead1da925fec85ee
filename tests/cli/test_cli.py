"""The ``lammer`` entry point as an operator meets it: ``--version``, and output piped into a
reader that goes away (``| head``), for every command that prints."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import CLI_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
LAMMER = str(Path(sys.executable).with_name("lammer"))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.heavy
def test_version_is_the_installed_package_version() -> None:
    result = subprocess.run(
        [LAMMER, "--version"], capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lammer {VERSION}\n"


def closed_pipe(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` with stdout on a real pipe whose reader has already gone: every write
    meets EPIPE (what ``| head -1`` does to a long output, without its race)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            argv,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=CLI_BOUND_S,
            check=False,
            cwd=ROOT,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["odds", "bonus-craps"],
        ["odds", "bust-bonus", "--json"],
        ["check-config", "config/uth.toml", "config/craps.toml"],
        ["check-config", "--schema"],
    ],
    ids=" ".join,
)
@pytest.mark.heavy
def test_a_reader_that_went_away_ends_the_command_quietly(args: list[str]) -> None:
    result = closed_pipe([LAMMER, *args])
    assert result.stderr == b""  # no BrokenPipeError traceback, no "Exception ignored"
    assert result.returncode == 141  # 128 + SIGPIPE: the output was cut short


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["odds", "bonus-craps"], "Bonus Craps, pay table 1"),
        (["check-config", "--schema"], "{"),
    ],
)
def test_piped_to_head(args: list[str], first: str) -> None:
    command = " ".join([LAMMER, *args])
    result = subprocess.run(
        ["bash", "-c", f"{command} | head -1"],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
        cwd=ROOT,
    )
    assert result.stdout == first + "\n"
    assert result.stderr == ""
