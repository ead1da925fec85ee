"""An operator's mistakes with the ``lammer`` command, each run as a real subprocess: one
sentence on stderr, a non-zero exit, never a traceback (issue 20, "Every mistake a
sentence")."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.broker import free_port
from tests.conftest import sigint_as_from_a_terminal
from tests.helpers.broker_access import Secured, secured, table_toml
from tests.integration.harness import LAMMER

__all__ = ["secured"]  # the fixture, used by name

pytestmark = pytest.mark.integration


def lammer(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LAMMER, *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def wrong_password(folder: Path) -> Path:
    path = folder / "wrong.password"
    path.write_text("not-the-password\n")
    path.chmod(0o600)
    return path


def test_run_with_a_wrong_password_stops_at_start_with_the_sentence(secured: Secured) -> None:
    secured.table("t1")
    secured.configure(secured.config("t1"))
    secured.broker.start()
    config = secured.root / "run-t1.toml"
    config.write_text(
        table_toml("t1", secured.port)
        + f'username = "lammer-t1"\npassword_file = "{wrong_password(secured.root)}"\n'
        + f'[journal]\npath = "{secured.root / "t1.db"}"\n'
    )
    done = lammer("run", "--config", config)
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert last_line(done.stderr) == (
        f"lammer: login refused by the MQTT broker at 127.0.0.1:{secured.port} as "
        "'lammer-t1': check username and password_file"
    )


def test_web_with_a_wrong_password_stops_with_the_sentence(secured: Secured) -> None:
    secured.table("t1")
    secured.configure(secured.config("t1"))
    secured.broker.start()
    done = lammer(
        "web",
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--mqtt-host",
        f"127.0.0.1:{secured.port}",
        "--mqtt-user",
        "display",
        "--mqtt-password-file",
        wrong_password(secured.root),
    )
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert last_line(done.stderr) == (
        f"lammer web: login refused by the MQTT broker at 127.0.0.1:{secured.port} as "
        "'display': check username and password_file"
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_web_on_a_port_in_use_says_so(busy_port: int) -> None:
    done = lammer("web", "--listen", f"127.0.0.1:{busy_port}", "--mqtt-host", "127.0.0.1:9")
    no_traceback(done)
    assert done.returncode == 2
    assert last_line(done.stderr) == (
        f"lammer web: cannot listen on 127.0.0.1:{busy_port}: the port is already in use "
        "(another lammer web, or another server)"
    )


def test_web_on_an_address_not_on_this_machine_says_so() -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine.
    done = lammer("web", "--listen", "192.0.2.7:8080", "--mqtt-host", "127.0.0.1:9")
    no_traceback(done)
    assert done.returncode == 2
    assert last_line(done.stderr) == (
        "lammer web: cannot listen on 192.0.2.7:8080: 192.0.2.7 is not an address of this machine"
    )


def test_ctrl_c_in_a_long_command_is_a_sentence_and_status_130(tmp_path: Path) -> None:
    # A simulation long enough to be interrupted; Ctrl-C is SIGINT to the command.
    process = subprocess.Popen(
        [LAMMER, "odds", "cover-all", "--rounds", "300000000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 120
        # Ctrl-C while the simulation runs: once the command has spent 2 s of CPU (its
        # imports take well under that), whatever the machine's load.
        while time.monotonic() < deadline and _cpu_seconds(process.pid) < 2.0:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert "Traceback" not in err
    assert process.returncode == 130
    assert err.strip().splitlines()[-1] == "lammer odds: interrupted"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (proc(5): fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_adduser_help_explains_every_option() -> None:
    done = lammer("web", "adduser", "--help")
    assert done.returncode == 0
    assert "ADDUSER_USERS" not in done.stdout
    assert "--users FILE" in done.stdout


if sys.platform != "linux":  # pragma: no cover
    pytest.skip("ptys, /proc and loopback addresses as on Linux", allow_module_level=True)
