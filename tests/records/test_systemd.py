"""systemd/lammer-records.service: verified by systemd-analyze, its exposure rated, and the
command it runs stopped by SIGTERM as systemd stops it (cleanly, status 0)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from deploy.broker import Broker
from tests.records.conftest import StoreDb

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "lammer-records.service"
ENV = ROOT / "systemd" / "lammer-records.env"
LAMMER = str(Path(sys.executable).with_name("lammer"))


def _instance(tmp_path: Path) -> Path:
    path = tmp_path / "lammer-records.service"
    path.write_text(UNIT.read_text().replace("/opt/lammer/bin/lammer", LAMMER))
    return path


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    unit = _instance(tmp_path)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    problems = [x for x in (done.stdout + done.stderr).splitlines() if "lammer-records" in x]
    assert done.returncode == 0, done.stderr
    assert problems == []
    rated = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    found = re.search(
        r"Overall exposure level for lammer-records\.service: (\d+\.\d)", rated.stdout
    )
    assert found, rated.stdout + rated.stderr
    assert float(found.group(1)) <= 1.2


def test_the_env_file_names_what_execstart_uses() -> None:
    names = set(
        re.findall(
            r"\$\{?([A-Z_]+)\}?", UNIT.read_text().split("ExecStart=", 1)[1].split("\n\n")[0]
        )
    )
    given = {
        line.split("=", 1)[0]
        for line in ENV.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert names == given == {"RECORDS_DB", "RECORDS_MQTT", "RECORDS_ARGS"}


def test_sigterm_stops_the_service_cleanly(mosquitto_private: Broker, store_db: StoreDb) -> None:
    proc = subprocess.Popen(
        [LAMMER, "records", "run", "--db", store_db.dsn,
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
