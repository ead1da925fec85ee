"""systemd/lammer-authenticate.service: verified by systemd-analyze and its exposure rated,
as lammer-records.service; its environment file names what ExecStart uses."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "lammer-authenticate.service"
ENV = ROOT / "systemd" / "lammer-authenticate.env"
LAMMER = str(Path(sys.executable).with_name("lammer"))


@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    unit = tmp_path / "lammer-authenticate.service"
    unit.write_text(UNIT.read_text().replace("/opt/lammer/bin/lammer", LAMMER))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    problems = [x for x in (done.stdout + done.stderr).splitlines() if "lammer-auth" in x]
    assert done.returncode == 0, done.stderr
    assert problems == []
    rated = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    found = re.search(
        r"Overall exposure level for lammer-authenticate\.service: (\d+\.\d)", rated.stdout
    )
    assert found, rated.stdout + rated.stderr
    assert float(found.group(1)) <= 1.2


def test_the_env_file_names_what_execstart_uses() -> None:
    command = UNIT.read_text().split("ExecStart=", 1)[1].split("\nTimeoutStopSec", 1)[0]
    names = set(re.findall(r"\$\{?([A-Z_]+)\}?", command))
    given = {
        line.split("=", 1)[0]
        for line in ENV.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert names == given == {"AUTH_MQTT", "AUTH_ARGS"}
