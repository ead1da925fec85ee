"""systemd/lammer-authenticate.service: verified by systemd-analyze and its exposure rated,
as lammer-records.service; its environment file names what ExecStart uses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import systemd_units as units

UNIT = units.SYSTEMD / "lammer-authenticate.service"
ENV = units.SYSTEMD / "lammer-authenticate.env"


@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    unit = units.with_this_lammer(UNIT, tmp_path / "lammer-authenticate.service")
    done, problems = units.verify(unit)
    assert done.returncode == 0, done.stderr
    assert problems == []
    found, output = units.exposure(unit)
    assert found, output
    assert float(found.group(1)) <= 1.2


def test_the_env_file_names_what_execstart_uses() -> None:
    names = units.exec_start_names(UNIT)
    assert names == units.env_file_names(ENV) == {"AUTH_MQTT", "AUTH_ARGS"}
