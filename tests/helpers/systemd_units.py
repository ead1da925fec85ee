"""lammer's systemd units as the tests check them: installed with this checkout's
``lammer``, verified and rated by ``systemd-analyze``, their environment files read."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import CLI_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "systemd"
LAMMER = Path(sys.executable).with_name("lammer")


def with_this_lammer(unit: Path, path: Path) -> Path:
    """``unit`` written to ``path`` with ExecStart's program this checkout's ``lammer``:
    ``systemd-analyze verify`` checks that it exists."""
    assert LAMMER.exists()
    text = unit.read_text()
    found = re.search(r"^ExecStart=(\S+)", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"{unit.name} has no ExecStart")
    path.write_text(text.replace(found.group(1), str(LAMMER)))
    return path


def systemd_analyze(*args: str) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze ARGS``, its output captured."""
    return subprocess.run(
        ["systemd-analyze", *args], capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
    )


def verify(unit_file: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``systemd-analyze verify`` of a unit file, and the lines it wrote about that unit."""
    result = systemd_analyze("verify", str(unit_file))
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and unit_file.name in line
    ]
    return result, problems


def exposure(unit_file: Path) -> tuple[re.Match[str] | None, str]:
    """``systemd-analyze security --offline``'s overall exposure line for a unit file (its
    level the match's group 1), and all it wrote."""
    result = systemd_analyze("security", "--offline=true", str(unit_file))
    name = re.escape(unit_file.name)
    found = re.search(rf"Overall exposure level for {name}: (\d+\.\d)", result.stdout)
    return found, result.stdout + result.stderr


def exec_start_names(unit: Path) -> set[str]:
    """The environment variables ExecStart uses (``$NAME`` or ``${NAME}``), its
    continuation lines included."""
    command = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit.read_text(), re.MULTILINE)
    if command is None:
        raise ValueError(f"{unit.name} has no ExecStart")
    return set(re.findall(r"\$\{?([A-Z_]+)\}?", command.group(1)))


def env_file_names(env: Path) -> set[str]:
    """The variables an environment file sets (comments skipped)."""
    return {
        line.split("=", 1)[0]
        for line in env.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
