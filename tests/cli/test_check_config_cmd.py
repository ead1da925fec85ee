"""``lammer check-config``: the installed command, run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI_BOUND_S

# make check leaves these out (make test runs them): each runs `lammer check-config`.
pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[2]
LAMMER = Path(sys.executable).with_name("lammer")


def lammer(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAMMER), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
    )


@pytest.mark.parametrize("name", ["uth.toml", "craps.toml", "bj.toml"])
def test_example_configs_pass(name: str) -> None:
    result = lammer("check-config", ROOT / "config" / name)
    assert result.returncode == 0, result.stderr
    table_id = {"uth.toml": "poker1", "craps.toml": "craps1", "bj.toml": "bj1"}[name]
    assert result.stdout.splitlines()[0].endswith(": OK")
    assert f"base topic lammer/{table_id}" in result.stdout
    assert result.stderr == ""


def test_every_problem_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "t1.toml"
    path.write_text(
        '[table]\nid = "t#1"\ngame = "BJ"\n[bust_bonus]\ndecks = 0\ndealer_hits_soft17 = true\n'
    )
    result = lammer("check-config", path)
    assert result.returncode == 2
    assert result.stdout == ""
    header, *problems = result.stderr.splitlines()
    assert header == f"{path}: 4 problems"
    assert sorted(problems) == sorted(
        [
            "table.id: must be usable as one MQTT topic level, got 't#1' ('#')",
            "bust_bonus.decks: must be between 1 and 8, got 0",
            "bust_bonus.dealer_hits_soft17: unknown key; did you mean 'dealer_hits_soft_17'?",
            "shuffler: required for a BJ table"
            " (the card-reading shoe speaks the shuffler protocol)",
        ]
    )


def test_missing_file_and_notes(tmp_path: Path) -> None:
    result = lammer("check-config", tmp_path / "none.toml")
    assert result.returncode == 2
    assert result.stderr.splitlines()[1:] == ["(file): no such file"]
    path = tmp_path / "t1.toml"
    path.write_text('[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n[bust_bonus]\n')
    result = lammer("check-config", path)
    assert result.returncode == 0
    assert "note: bust_bonus: not used by a CRAPS table (ignored)" in result.stdout


def test_schema() -> None:
    result = lammer("check-config", "--schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert set(schema["properties"]) >= {"table", "shuffler", "dice_reader", "mqtt", "journal"}


def test_a_password_file_others_may_read_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t1.toml"
    path.write_text(
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        '[mqtt]\nusername = "lammer-t1"\npassword_file = "t1.mqtt-password"\n'
    )
    secret = tmp_path / "t1.mqtt-password"
    result = lammer("check-config", path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[1:] == [f"mqtt.password_file: no such file: {secret}"]

    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    result = lammer("check-config", path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[1:] == [
        "mqtt.password_file: must be readable by its owner only, got mode 0644 "
        f"(group or others may read or write it): chmod 600 {secret}"
    ]

    secret.chmod(0o600)
    result = lammer("check-config", path)
    assert result.returncode == 0, result.stderr


def test_several_files_each_checked_and_reported(tmp_path: Path) -> None:
    bad = tmp_path / "t9.toml"
    bad.write_text(
        '[table]\nid = "t9"\ngame = "BJ"\n[shuffler]\nport = "x"\n[bust_bonus]\ndecks = 9\n'
    )
    good = [ROOT / "config" / name for name in ("uth.toml", "craps.toml", "bj.toml")]
    result = lammer("check-config", good[0], bad, *good[1:])
    assert result.returncode == 2  # one bad file is enough
    ok_lines = [line for line in result.stdout.splitlines() if line.endswith(": OK")]
    assert ok_lines == [f"{path}: OK" for path in good]  # the good ones are reported too
    assert result.stderr.splitlines() == [
        f"{bad}: 1 problem",
        "bust_bonus.decks: must be between 1 and 8, got 9",
    ]
    result = lammer("check-config", *good)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": OK\n") == 3


def test_one_table_id_in_two_files_is_a_problem(tmp_path: Path) -> None:
    # A file copied from another table and not edited: two daemons as one table.
    copy = tmp_path / "poker2.toml"
    copy.write_text((ROOT / "config" / "uth.toml").read_text())
    result = lammer("check-config", ROOT / "config" / "uth.toml", copy)
    assert result.returncode == 2
    assert result.stdout.count(": OK\n") == 2  # each file is valid on its own
    assert result.stderr == (
        f"table id 'poker1' is given by more than one file: {ROOT / 'config' / 'uth.toml'}, "
        f"{copy}\n"
        # Not edited, it names the first table's shuffler too (one port, one device).
        f"serial port /dev/lammer/shuffler is given to more than one device: "
        f"{ROOT / 'config' / 'uth.toml'} [shuffler], {copy} [shuffler]\n"
    )


def test_the_systemd_instance_must_be_the_table_id(tmp_path: Path) -> None:
    config = tmp_path / "poker2.toml"
    config.write_text((ROOT / "config" / "uth.toml").read_text())  # still says "poker1"
    result = lammer("check-config", "--instance", "poker2", config)
    assert result.returncode == 2
    problem = (
        "table.id: is 'poker1', but the systemd instance is 'poker2' (lammer@poker2): "
        "the instance name must be the table id"
    )
    assert result.stderr.splitlines() == [f"{config}: 1 problem", problem]
    assert result.stdout == ""
    # `lammer run` refuses it the same way, before opening anything.
    journal = tmp_path / "poker1.db"
    config.write_text(config.read_text().replace("/var/lib/lammer/poker1.db", str(journal)))
    result = lammer("run", "--config", config, "--instance", "poker2")
    assert result.returncode == 2
    assert result.stderr == f"lammer: {config}: {problem}\n"
    assert not journal.exists()
    # The right name passes.
    result = lammer("check-config", "--instance", "poker1", config)
    assert result.returncode == 0, result.stderr
    result = lammer("check-config", "--instance", "poker1", config, config)
    assert result.returncode == 2
    assert "--instance takes exactly one FILE" in result.stderr


def test_one_serial_device_for_two_devices_is_a_problem(tmp_path: Path) -> None:
    # Issue 20: `check-config uth.toml craps.toml bj.toml` accepted two tables on one port.
    # A udev name (a link) and the device it points to are one port.
    device = tmp_path / "ttyUSB0"
    device.touch()
    link = tmp_path / "shuffler"
    link.symlink_to(device)
    first = tmp_path / "poker1.toml"
    first.write_text(f'[table]\nid = "poker1"\ngame = "UTH"\n[shuffler]\nport = "{link}"\n')
    second = tmp_path / "bj1.toml"
    second.write_text(f'[table]\nid = "bj1"\ngame = "BJ"\n[shuffler]\nport = "{device}"\n')
    third = tmp_path / "craps1.toml"
    third.write_text(
        '[table]\nid = "craps1"\ngame = "CRAPS"\n[dice_reader]\nport = "socket://10.0.0.9:4001"\n'
    )
    result = lammer("check-config", first, second, third)
    assert result.returncode == 2
    assert result.stdout.count(": OK\n") == 3  # each file is valid on its own
    assert result.stderr == (
        f"serial port {device} is given to more than one device: "
        f"{first} [shuffler], {second} [shuffler]\n"
    )
    # The same URL twice (a serial device server's port) is one device too.
    fourth = tmp_path / "craps2.toml"
    fourth.write_text(third.read_text().replace("craps1", "craps2"))
    result = lammer("check-config", third, fourth)
    assert result.returncode == 2
    assert result.stderr == (
        "serial port socket://10.0.0.9:4001 is given to more than one device: "
        f"{third} [dice_reader], {fourth} [dice_reader]\n"
    )


@pytest.mark.parametrize(
    ("lines", "summary"),
    [
        ('port = "/dev/ttyUSB0"', "dice_reader: /dev/ttyUSB0 (115200 8N1)"),
        (
            'port = "/dev/ttyS1"\nbaudrate = 9600\nparity = "E"\nrs485 = true',
            "dice_reader: /dev/ttyS1 (9600 8E1, RS-485)",
        ),
        (
            'port = "rfc2217://10.0.0.9:4001"\nstopbits = 2.0',
            "dice_reader: rfc2217://10.0.0.9:4001 (115200 8N2, set on the device server by "
            "RFC 2217)",
        ),
        (
            'port = "socket://10.0.0.9:4001"',
            "dice_reader: socket://10.0.0.9:4001 (raw TCP: the device server's own line settings)",
        ),
    ],
)
def test_the_summary_says_how_the_line_is_set(tmp_path: Path, lines: str, summary: str) -> None:
    path = tmp_path / "c1.toml"
    path.write_text(f'[table]\nid = "c1"\ngame = "CRAPS"\n[dice_reader]\n{lines}\n')
    result = lammer("check-config", path)
    assert result.returncode == 0, result.stderr
    assert f"  {summary}" in result.stdout.splitlines()
