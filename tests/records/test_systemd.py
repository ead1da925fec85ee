"""systemd/lammer-records.service: verified by systemd-analyze, its exposure rated, and the
command it runs stopped by SIGTERM as systemd stops it (cleanly, status 0)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from deploy.broker import Broker
from tests.helpers.systemd_units import (
    LAMMER,
    SYSTEMD,
    env_file_names,
    exec_start_names,
    exposure,
    verify,
    with_this_lammer,
)
from tests.records.conftest import StoreDb

UNIT = SYSTEMD / "lammer-records.service"
ENV = SYSTEMD / "lammer-records.env"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    unit = with_this_lammer(UNIT, tmp_path / "lammer-records.service")
    done, problems = verify(unit)
    assert done.returncode == 0, done.stderr
    assert problems == []
    found, output = exposure(unit)
    assert found, output
    assert float(found.group(1)) <= 1.2


def test_the_env_file_names_what_execstart_uses() -> None:
    names = exec_start_names(UNIT)
    assert names == env_file_names(ENV) == {"RECORDS_DB", "RECORDS_MQTT", "RECORDS_ARGS"}


def test_sigterm_stops_the_service_cleanly(mosquitto_private: Broker, store_db: StoreDb) -> None:
    proc = subprocess.Popen(
        [str(LAMMER), "records", "run", "--db", store_db.dsn,
         "--mqtt", f"127.0.0.1:{mosquitto_private.port}", "--mqtt-user", ""],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # it says when it has subscribed
            if "subscribed" in line:
                break
        with psycopg.connect(store_db.dsn) as conn:  # its migrations are applied
            applied = conn.execute("SELECT count(*) FROM schema_migration").fetchone()
        assert applied is not None
        assert applied[0] >= 2
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
