"""systemd/lammer-authenticate.service: verified by systemd-analyze and its exposure rated,
as lammer-records.service; its environment file names what ExecStart uses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.systemd_units import (
    SYSTEMD,
    env_file_names,
    exec_start_names,
    exposure,
    verify,
    with_this_lammer,
)

UNIT = SYSTEMD / "lammer-authenticate.service"
ENV = SYSTEMD / "lammer-authenticate.env"


@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    unit = with_this_lammer(UNIT, tmp_path / "lammer-authenticate.service")
    done, problems = verify(unit)
    assert done.returncode == 0, done.stderr
    assert problems == []
    found, output = exposure(unit)
    assert found, output
    assert float(found.group(1)) <= 1.2


def test_the_env_file_names_what_execstart_uses() -> None:
    assert exec_start_names(UNIT) == env_file_names(ENV) == {"AUTH_MQTT", "AUTH_ARGS"}
